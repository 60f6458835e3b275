"""How every command opens the workspace's skill bank: one configuration rule, one seeding rule.

``run``, ``eval``, ``sft``, ``train``, ``skills measure`` and the ``skills`` commands all build
their :class:`memory.BankConfig` with :func:`bank_config`, so a bank kept on PostgreSQL, a Chroma
server or another embedder (``$SKILLRL_DATABASE_URL``, ``$SKILLRL_CHROMA_URL``,
``$SKILLRL_EMBEDDER``, or the ``skills`` commands' options of the same names) is the same bank
whichever command opens it. Commands that play episodes open it with :func:`open_bank`, which
seeds an empty bank with the environment's starting skills.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from memory import BankConfig, SkillBank

EMBEDDER_ENV_VAR = "SKILLRL_EMBEDDER"
"""Environment variable naming the bank's sentence-transformers model (folder or id)."""


def bank_config(
    workspace: str | Path | None,
    *,
    database_url: str | None = None,
    chroma_url: str | None = None,
    embedder: str | None = None,
    read_only: bool = False,
) -> BankConfig:
    """Return the bank's settings; each location left None falls back to its variable.

    ``workspace`` resolves as everywhere (``skillrl.workspace.resolve_workspace``: the path,
    else ``$SKILLRL_WORKSPACE``, else ``./.skillrl``).
    """
    # Deferred, as in every command module: importing memory loads SQLAlchemy and Chroma, and
    # `skillrl --help` should not wait for them.
    from memory import BankConfig
    from memory.config import CHROMA_URL_ENV_VAR, DATABASE_URL_ENV_VAR, DEFAULT_EMBEDDER
    from skillrl.workspace import resolve_workspace

    return BankConfig(
        workspace=resolve_workspace(workspace),
        database_url=database_url or os.environ.get(DATABASE_URL_ENV_VAR) or None,
        chroma_url=chroma_url or os.environ.get(CHROMA_URL_ENV_VAR) or None,
        embedder=embedder or os.environ.get(EMBEDDER_ENV_VAR) or DEFAULT_EMBEDDER,
        read_only=read_only,
    )


def open_bank(
    workspace: str | Path | None,
    env_id: str,
    *,
    seed: bool = True,
    console: Console | None = None,
) -> SkillBank:
    """Open the workspace's bank for playing ``env_id``, seeding ``env_id``'s entries if needed.

    Seeding happens when the bank holds none of them
    (:func:`skillrl.distill.seeding.seed_bank_if_empty`).

    A read-only bank (files the user may not write) is opened as it is and never seeded; the
    caller decides whether it can do its job with one. With ``console``, opening and seeding
    show a status line, and a seeding says what it added.
    """
    from contextlib import nullcontext

    from memory import SkillBank

    config = bank_config(workspace)
    opening = console.status("opening the skill bank (loading the embedder)") if console else None
    with opening or nullcontext():
        bank = SkillBank.open(config)
        # Playing retrieves every turn: the embedder loads here, under this status, so the
        # first turn's retrieval time is retrieval, not the model's load.
        bank.store.embedder.embed(["warm up"])
    if seed and not bank.read_only:
        _seed(bank, env_id, console)
    return bank


def _seed(bank: SkillBank, env_id: str, console: Console | None) -> None:
    from contextlib import nullcontext

    from rich.markup import escape

    from skillrl.distill.seeding import seed_bank_if_empty

    status = f"checking the skill bank for {env_id}'s starting skills"
    with console.status(status) if console else nullcontext():
        report = seed_bank_if_empty(bank, env_id)
    if report is not None and console is not None:
        console.print(
            f"[cyan]seeded the skill bank with {env_id}'s {report.added} starting entries "
            f"({report.merged} merged) from {escape(str(report.source))} in {report.seconds:.1f}s "
            "(skip with --no-seed-bank)[/]"
        )
