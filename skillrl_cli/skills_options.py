"""Options and helpers shared by the ``skillrl skills`` command modules."""

from __future__ import annotations

import functools
import getpass
from collections.abc import Callable
from typing import Any

import click
from sqlalchemy.exc import DatabaseError

from memory.types import ENTRY_KINDS
from skillrl_cli.options import workspace_option
from skillrl_core.errors import BankError, InvalidEntryError, UnknownEnvError

KINDS = ENTRY_KINDS
TEXT_FIELDS = (
    ("title", "Short name of the entry."),
    ("principle", "The rule itself, stated generally."),
    ("when_to_apply", "When the rule applies."),
    ("env", "Environment id (task skills and notes); skillrl envs lists them."),
    ("category", "Task category within the environment, e.g. fashion."),
    ("failure_point", "Notes only: where the episode went wrong."),
    ("flawed_action", "Notes only: the action that was wrong."),
    ("correction", "Notes only: what should have been done instead."),
    ("offers", "Cases only: what the solution comes in, values separated by ' | '."),
)


def default_author() -> str:
    """Return the user name (the default author of changes)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "person"


def bank_options(
    *,
    changes: bool = False,
    writes_entries: bool = False,
    verify: bool = True,
    check_first: Callable[[dict[str, Any]], None] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add the options that locate the bank, and pass one opened ``bank`` to the command.

    ``changes``: the command changes the bank, so a read-only bank (``--dry-run``) refuses it
    up front, before an editor or a confirmation prompt opens. A command without ``changes``
    is a read command: it opens the bank read-only, so it never writes it (a disagreeing index
    is reported, not repaired). ``writes_entries``: it writes an entry's env, which must be a
    registered environment. ``verify``: check SQL against the index on opening (off for
    ``reindex``, which repairs them). ``check_first``: checks of the command's own options
    (given the keyword arguments) run before the bank is opened, so a typo fails at once.
    """
    return functools.partial(
        _with_bank,
        changes=changes,
        writes_entries=writes_entries,
        verify=verify,
        check_first=check_first,
    )


def _with_bank(
    command: Callable[..., Any],
    *,
    changes: bool,
    writes_entries: bool,
    verify: bool,
    check_first: Callable[[dict[str, Any]], None] | None,
) -> Callable[..., Any]:
    @workspace_option
    @click.option(
        "--database-url",
        envvar="SKILLRL_DATABASE_URL",
        default=None,
        help="SQLAlchemy URL of the bank (e.g. postgresql+psycopg://...); default: SQLite in "
        "the workspace. Also $SKILLRL_DATABASE_URL.",
    )
    @click.option(
        "--chroma-url",
        envvar="SKILLRL_CHROMA_URL",
        default=None,
        help="Chroma server URL (http://host:port); default: an embedded index in the "
        "workspace. Also $SKILLRL_CHROMA_URL.",
    )
    @click.option(
        "--embedder",
        envvar="SKILLRL_EMBEDDER",
        default="all-MiniLM-L6-v2",
        show_default=True,
        help="sentence-transformers model folder or id (the default is the packaged copy). "
        "Also $SKILLRL_EMBEDDER.",
    )
    @functools.wraps(command)
    def wrapper(
        workspace: str, database_url: str | None, chroma_url: str | None, embedder: str, **kw: Any
    ) -> Any:
        from memory import SkillBank
        from skillrl_cli.bank_access import bank_config

        dry_run = bool(kw.get("dry_run"))  # reads the bank to say what would change
        config = bank_config(
            workspace,
            database_url=database_url,
            chroma_url=chroma_url,
            embedder=embedder,
            read_only=dry_run or not changes,
        )
        if kw.get("env") and writes_entries:
            check_env(kw["env"])
        if check_first is not None:
            check_first(kw)
        try:
            with SkillBank.open(config, verify=verify) as bank:
                if changes and not dry_run:
                    bank.require_writable()  # before an editor or a confirmation prompt opens
                if "entry_id" in kw:
                    kw["entry_id"] = bank.resolve_id(kw["entry_id"])
                return command(bank=bank, **kw)
        except DatabaseError as e:  # what the bank did not already explain (damage, I/O)
            raise BankError(f"the skill-bank database failed: {e.orig}") from e

    return wrapper


def check_env(env: str) -> None:
    """Refuse an entry for an environment that is not registered (a typo would hide it).

    Only commands that write entries check: listing or searching by an env that no longer
    exists is harmless and lets old entries be found.
    """
    from envs.registry import check_id, registered

    try:
        check_id(env)  # also finds entry points and module:SPEC references
    except UnknownEnvError as error:
        known = ", ".join(sorted(registered()))
        raise InvalidEntryError(
            f"env ({env!r}) is not a registered environment; known: {known} (see `skillrl envs`)"
        ) from error


def author_option(text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Return the ``--author`` option (default: the user name) with help ``text``."""
    return click.option(
        "--author", default=default_author, show_default="your user name", help=text
    )
