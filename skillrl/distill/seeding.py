"""First-run seeding: a workspace bank gets an environment's shipped starting bank.

It does so the first time that environment plays in the workspace.

The starting bank (``skillrl/distill/data/<env>_starting_bank.json``) is what ``skillrl bootstrap
--env <env> --export`` writes: drafts distilled from the scripted expert's training-goal episodes.
Seeding imports it through ``bank.add`` so the embeddings and merge-on-insert are the bank's own.
Regenerate it with the command stored in the file (``regenerate``).

Seeding also adds the hand-written general skills (``skillrl/distill/data/general_skills.json``,
same format, general entries only) of that environment, and with the first environment seeded
the ones for every environment, first, so that every prompt has general skills from the first
turn: the distiller finds few general patterns (one in the shipped bank), and retrieval always
serves the best ``k_general`` of the environment's own and the environment-agnostic ones.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.types import ENTRY_KINDS, EntryDraft
from skillrl.distill.leakage import find_leaks
from skillrl_core.errors import DataFileError
from skillrl_core.files import atomic_write_json

if TYPE_CHECKING:
    from memory.bank import SkillBank

FORMAT = "skillrl-starting-bank"
VERSION = 1
AUTHOR = "seed"
_TEXT_FIELDS = (
    "title",
    "principle",
    "when_to_apply",
    "failure_point",
    "flawed_action",
    "correction",
    "offers",
)


@dataclass
class SeedReport:
    """What seeding added to an empty bank."""

    env: str
    source: str
    entries: int
    added: int
    merged: int
    seconds: float


GENERAL_SKILLS_FILE = "general_skills.json"


def general_skills_path() -> Path:
    """Return the shipped file of hand-written general skills."""
    return Path(str(resources.files("skillrl.distill.data").joinpath(GENERAL_SKILLS_FILE)))


def load_general_skills(
    path: str | os.PathLike[str] | None = None, *, env: str | None = None, agnostic: bool = True
) -> list[EntryDraft]:
    """Read the general skills file (the shipped one by default); every entry must be general.

    A general skill applies across one environment's categories (``env`` set: how to shop) or
    to every environment (``env`` null: use only the actions offered). ``env``: keep that
    environment's skills only (None: every environment's); ``agnostic``: keep the ones for every
    environment too.
    """
    path = general_skills_path() if path is None else Path(path)
    _, drafts = load_starting_bank(path)
    for i, draft in enumerate(drafts):
        if draft.kind != "general" or draft.category is not None:
            raise DataFileError(f"{path}: entries[{i}] must be a general skill with no category")
    return [
        d
        for d in drafts
        if (d.env is None and agnostic) or (d.env is not None and env in (None, d.env))
    ]


def starting_bank_path(env_id: str) -> Path | None:
    """Return the shipped starting bank of ``env_id``, or None if none ships."""
    path = resources.files("skillrl.distill.data").joinpath(f"{env_id}_starting_bank.json")
    return Path(str(path)) if path.is_file() else None


def _draft(record: Any, where: str) -> EntryDraft:
    if not isinstance(record, dict):
        raise DataFileError(f"{where} must be an object")
    if record.get("kind") not in ENTRY_KINDS:
        raise DataFileError(
            f"{where}.kind must be one of {list(ENTRY_KINDS)}, got {record.get('kind')!r}"
        )
    for name in _TEXT_FIELDS:
        if not isinstance(record.get(name, ""), str):
            raise DataFileError(f"{where}.{name} must be a string")
    if not record.get("title") or not record.get("principle"):
        raise DataFileError(f"{where} needs a non-empty title and principle")
    # A case names what solved its request on purpose (skillrl.distill.cases).
    leaks = (
        []
        if record.get("kind") == "case"
        else find_leaks("\n".join(record.get(n, "") for n in _TEXT_FIELDS))
    )
    if leaks:
        raise DataFileError(f"{where} leaks episode specifics: {'; '.join(leaks)}")
    known = {f for f in EntryDraft.__dataclass_fields__ if f != "trajectory_ids"}
    unknown = set(record) - known
    if unknown:
        raise DataFileError(f"{where} has unknown field(s) {sorted(unknown)}")
    return EntryDraft(**record)


def load_starting_bank(path: str | os.PathLike[str]) -> tuple[str, list[EntryDraft]]:
    """Read and validate a starting-bank file; return ``(env, drafts)``. Raise DataFileError."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise DataFileError(f"cannot read starting bank {path}: {error}") from error
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
        raise DataFileError(f"{path} is not a {FORMAT} file of version {VERSION}")
    records = data.get("entries")
    if not isinstance(records, list) or not records:
        raise DataFileError(f"{path} has no entries")
    return str(data.get("env") or ""), [
        _draft(r, f"{path}: entries[{i}]") for i, r in enumerate(records)
    ]


def write_starting_bank(
    path: str | os.PathLike[str], env_id: str, drafts: list[EntryDraft], *, regenerate: str
) -> None:
    """Write drafts as a starting bank, atomically (temp file + rename)."""
    records = []
    for draft in drafts:
        record = asdict(draft)
        record.pop("trajectory_ids")  # episode ids mean nothing in another workspace
        records.append(record)
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "env": env_id,
        "regenerate": regenerate,
        "entries": records,
    }
    atomic_write_json(path, payload, indent=1, sort_keys=False)


def starting_cases_path(env_id: str) -> Path | None:
    """Return the shipped cases of ``env_id`` (``<env>_starting_cases.json``), or None."""
    path = resources.files("skillrl.distill.data").joinpath(f"{env_id}_starting_cases.json")
    return Path(str(path)) if path.is_file() else None


def seed_bank(
    bank: SkillBank,
    path: str | os.PathLike[str],
    env_id: str,
    *,
    general: bool = True,
    agnostic: bool = True,
    cases: str | os.PathLike[str] | None = None,
) -> SeedReport:
    """Add the general skills, every entry of a starting-bank file, then ``cases``' entries.

    ``general=False`` seeds the starting bank alone; ``agnostic=False`` leaves out the general
    skills for every environment (a bank seeded for another environment holds them already);
    ``cases``: a starting-cases file (the same format, entries of kind ``case``: what solved each
    training request).
    """
    started = time.perf_counter()
    drafts = load_general_skills(env=env_id, agnostic=agnostic) if general else []
    drafts += load_starting_bank(path)[1]
    if cases is not None:
        case_entries = load_starting_bank(cases)[1]
        wrong = [d.title for d in case_entries if d.kind != "case"]
        if wrong:
            raise DataFileError(f"{cases}: every entry must be a case, not {wrong[0]!r}")
        drafts += case_entries
    results = bank.add_many(drafts, author=AUTHOR)  # one transaction: seeded fully or not at all
    merged = sum(r.merged for r in results)
    added = len(results) - merged
    return SeedReport(env_id, str(path), len(drafts), added, merged, time.perf_counter() - started)


def seed_bank_if_empty(bank: SkillBank, env_id: str) -> SeedReport | None:
    """Seed ``env_id``'s starting bank into a bank that holds no entry of ``env_id`` yet.

    Entries of any status count (a person who retired every seeded entry is not seeded again).
    The general skills for every environment come with the first environment seeded only, so
    one workspace holds several environments' banks side by side. Returns None when the bank
    already has entries of ``env_id`` or no starting bank ships for it.
    """
    empty = bank.count(status=None) == 0
    if not empty and bank.list(env=env_id, status=None):
        return None
    path = starting_bank_path(env_id)
    if path is None:
        return None
    return seed_bank(bank, path, env_id, agnostic=empty, cases=starting_cases_path(env_id))
