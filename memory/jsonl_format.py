"""Our own bank file: JSONL, one full entry record (statistics and provenance included) per line.

An import is all-or-nothing: every line is parsed and validated first, and a malformed one is
reported with its line number before anything is written; the writes then happen in one
transaction. An export is written atomically (temp file + rename) into an existing folder.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.bulk import insert_entries
from memory.entries import COUNTER_FIELDS, check_entry_id, normalise_draft, validate_draft
from memory.types import Entry, EntryDraft
from skillrl_core.errors import DataFileError, ImportFormatError, InvalidEntryError
from skillrl_core.files import atomic_write_text

if TYPE_CHECKING:
    from memory.bank import SkillBank


@dataclass
class ImportReport:
    """What an import did."""

    records: int
    """Records read from the file."""
    added: list[str] = field(default_factory=list)
    """Ids of new entries."""
    merged: list[str] = field(default_factory=list)
    """Ids of existing entries that near-duplicates merged into."""


def read_utf8(path: Path) -> str:
    """Return the text of a bank file; an unreadable one raises :class:`DataFileError`."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DataFileError(f"cannot read {path}: {e}") from e


def export_jsonl(bank: SkillBank, path: Path, *, status: str | None = None) -> int:
    """Write every entry (``status`` None: active and retired) as one JSON object per line."""
    entries = bank.list(status=status)
    lines = [json.dumps(dataclasses.asdict(e), ensure_ascii=False) for e in entries]
    atomic_write_text(path, "".join(line + "\n" for line in lines), create_folder=False)
    return len(entries)


PROVENANCE_TEXT = ("source", "author", "reason")
PROVENANCE_KEYS = frozenset(PROVENANCE_TEXT + ("trajectory_ids", "external_id", "similarity",
                                               "created_at"))  # fmt: skip
MAX_COUNT = 2**31 - 1
"""Largest counter a bank stores (PostgreSQL's ``integer``; SQLite's is wider)."""
POSITIVE_FIELDS = ("revision", "support_count")
"""Counters that start at 1: a stored entry has at least its first revision and one source."""


def _check_time(name: str, value: Any, where: str) -> None:
    if not isinstance(value, str):
        raise ImportFormatError(f"{where}: field {name!r} must be ISO-8601 text, got {value!r}")
    if value:
        try:
            datetime.fromisoformat(value)
        except ValueError as e:
            raise ImportFormatError(
                f"{where}: field {name!r} ({value!r}) is not an ISO-8601 time"
            ) from e


def _check_no_nul(name: str, value: Any, where: str) -> None:
    # SQLite stores NUL characters, PostgreSQL refuses them: a bank must move between both.
    if isinstance(value, str) and "\x00" in value:
        raise ImportFormatError(f"{where}: field {name!r} contains a NUL character")
    # A JSON escape can spell a lone surrogate, which no UTF-8 database can store.
    if isinstance(value, str) and any("\ud800" <= c <= "\udfff" for c in value):
        raise ImportFormatError(
            f"{where}: field {name!r} contains a lone surrogate (an unpaired \\ud800-\\udfff "
            "escape), which is not text"
        )


def parse_json(text: str, where: str) -> Any:
    """Parse one JSON document of an import file; refuse it, naming ``where``, if it is not.

    Nesting deeper than Python's recursion limit is refused like any malformed JSON.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ImportFormatError(f"{where}: not valid JSON ({e.msg})") from e
    except RecursionError as e:
        raise ImportFormatError(f"{where}: not valid JSON (nested too deeply)") from e


def _check_provenance(records: Any, where: str) -> None:
    if not isinstance(records, list):
        raise ImportFormatError(
            f"{where}: field 'provenance' must be a list of records, got {type(records).__name__}"
        )
    for i, record in enumerate(records):
        at = f"provenance[{i}]"
        if not isinstance(record, dict):
            raise ImportFormatError(f"{where}: field {at!r} must be an object")
        unknown = sorted(set(record) - PROVENANCE_KEYS)
        if unknown:
            raise ImportFormatError(
                f"{where}: field {at!r} has unknown key(s) {', '.join(unknown)}"
            )
        for key in PROVENANCE_TEXT:
            if not isinstance(record.get(key, ""), str):
                raise ImportFormatError(f"{where}: field '{at}.{key}' must be text")
            _check_no_nul(f"{at}.{key}", record.get(key), where)
        ids = record.get("trajectory_ids", [])
        if not isinstance(ids, list) or not all(isinstance(t, str) for t in ids):
            raise ImportFormatError(f"{where}: field '{at}.trajectory_ids' must be a list of ids")
        for t in ids:
            _check_no_nul(f"{at}.trajectory_ids", t, where)
        external = record.get("external_id")
        if external is not None and not isinstance(external, str):
            raise ImportFormatError(f"{where}: field '{at}.external_id' must be text or null")
        _check_no_nul(f"{at}.external_id", external, where)
        similarity = record.get("similarity")
        if similarity is not None and (
            isinstance(similarity, bool)
            or not isinstance(similarity, (int, float))
            or not math.isfinite(similarity)
        ):
            raise ImportFormatError(f"{where}: field '{at}.similarity' must be a number or null")
        _check_time(f"{at}.created_at", record.get("created_at", ""), where)


def _check_counters(data: dict[str, Any], where: str) -> None:
    for name in COUNTER_FIELDS + ("revision",):
        value = data.get(name, 1 if name in POSITIVE_FIELDS else 0)
        low = 1 if name in POSITIVE_FIELDS else 0
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_COUNT:
            big = isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**12
            shown = f"{value:.3g}" if big else repr(value)
            raise ImportFormatError(
                f"{where}: field {name!r} ({shown}) must be an integer from {low} to "
                f"{MAX_COUNT} (the database's integer column)"
            )
    pairs = data.get("paired_pairs", 0)
    discordant = data.get("paired_with_only", 0) + data.get("paired_without_only", 0)
    if discordant > pairs:
        raise ImportFormatError(
            f"{where}: paired_with_only + paired_without_only ({discordant}) exceeds "
            f"paired_pairs ({pairs})"
        )
    delta = data.get("paired_score_delta_sum", 0.0)
    if (
        isinstance(delta, bool)
        or not isinstance(delta, int | float)
        or not math.isfinite(delta)
        or abs(delta) > pairs
    ):
        raise ImportFormatError(
            f"{where}: field 'paired_score_delta_sum' ({delta!r}) must be a number within "
            f"+-paired_pairs ({pairs}): scores lie in [0, 1]"
        )


def _entry_record(data: Any, where: str) -> Entry:
    if not isinstance(data, dict):
        raise ImportFormatError(f"{where}: expected a JSON object, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(Entry)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ImportFormatError(f"{where}: unknown field(s) {', '.join(unknown)}")
    for name in ("id", "kind", "title", "principle"):
        if not isinstance(data.get(name), str) or not data.get(name):
            raise ImportFormatError(f"{where}: field {name!r} is missing or not text")
    try:
        check_entry_id(data["id"], option="field 'id'")
    except InvalidEntryError as e:
        raise ImportFormatError(f"{where}: {e}") from e
    for name, value in data.items():
        _check_no_nul(name, value, where)
    _check_counters(data, where)
    if data.get("status", "active") not in ("active", "retired"):
        raise ImportFormatError(f"{where}: status must be 'active' or 'retired'")
    for name in ("created_at", "updated_at"):
        _check_time(name, data.get(name, ""), where)
    _check_provenance(data.get("provenance", []), where)
    try:
        entry = Entry(**data)
        validate_draft(normalise_draft(entry))
    except (TypeError, InvalidEntryError) as e:
        raise ImportFormatError(f"{where}: {e}") from e
    return entry


@dataclass
class CheckedRecord:
    """One record of an import file after validation: its entry or draft, or why it is refused."""

    where: str
    """Where the record is: ``file:line`` (JSONL) or its JSON path (SkillRL)."""
    item: Entry | EntryDraft | None
    """The record as the import would write it (None: refused)."""
    error: str = ""
    """Why it is refused (the whole message, naming ``where``); empty when it is not."""
    in_bank: bool = False
    """Refused only because the bank already holds an entry with its id."""
    title: str = ""
    """The record's title as the file gives it, when it gives one as text (refused records
    too, so a person can tell which record was refused)."""


def written_title(record: Any, key: str = "title") -> str:
    """Return ``record[key]`` when ``record`` is an object whose ``key`` is text, else ""."""
    value = record.get(key) if isinstance(record, dict) else None
    return value if isinstance(value, str) else ""


def check_jsonl(bank: SkillBank, path: Path) -> list[CheckedRecord]:
    """Validate every line of a JSONL export: the entries, and each line that would be refused.

    The whole file is read, past the first bad line; a file that cannot be read raises
    :class:`DataFileError`.
    """
    records: list[CheckedRecord] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(read_utf8(path).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        data: Any = None
        try:
            data = parse_json(line, where)
            entry = _entry_record(data, where)
        except ImportFormatError as e:
            records.append(CheckedRecord(where, None, str(e), title=written_title(data)))
            continue
        if entry.id in seen:
            error = f"{where}: id {entry.id} repeats line {seen[entry.id]}"
            records.append(CheckedRecord(where, None, error, title=entry.title))
            continue
        seen[entry.id] = number
        records.append(CheckedRecord(where, entry, title=entry.title))
    existing = bank.entries(list(seen))
    for record in records:
        if isinstance(record.item, Entry) and record.item.id in existing:
            record.error = (
                f"{record.where}: an entry with id {record.item.id} is already in the bank"
            )
            record.item, record.in_bank = None, True
    return records


def import_jsonl(bank: SkillBank, path: Path, *, author: str = "import") -> ImportReport:
    """Insert the full records of a JSONL export (ids kept; an existing id is an error)."""
    records = check_jsonl(bank, path)
    # A malformed line is reported before an id the bank already has (the file is wrong first).
    malformed = [r for r in records if r.error and not r.in_bank]
    if malformed:
        raise ImportFormatError(malformed[0].error)
    taken = [r for r in records if r.in_bank]
    if taken:
        raise ImportFormatError(f"{taken[0].error} (nothing was imported)")
    entries = [r.item for r in records if isinstance(r.item, Entry)]
    insert_entries(bank.store, entries, author=author)
    return ImportReport(records=len(entries), added=[e.id for e in entries])
