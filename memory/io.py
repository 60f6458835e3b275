"""Import and export: JSONL of full records, and SkillRL's published skill-bank JSON.

Imports are all-or-nothing: every record is parsed and validated first, and a malformed one is
reported with its line (JSONL) or JSON path (SkillRL) before anything is written; the writes then
happen in one transaction. Exports are written atomically (temp file + rename).

SkillRL mistakes (``description``, ``why_it_happens``, ``how_to_avoid``) map to notes as
title, ``failure_point`` and ``principle``; exporting maps them back, adding a note's
``flawed_action`` to the description and its ``correction`` to ``how_to_avoid`` when present.

SkillRL's task categories (``apparel``, ...) are not an environment's (``fashion``, ...): an
import can map them (``category_map``; the environment's default table lives with the
environment, e.g. ``envs.webshop.categories``). A task skill whose category was mapped keeps its
SkillRL category in its ``source`` (``import:skillrl:<category>``), and export files it back
under that category, so a round trip gives back the original file.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.bulk import insert_entries
from memory.entries import STAT_FIELDS, normalise_draft, validate_draft
from memory.types import Entry, EntryDraft
from skillrl_core.errors import DataFileError, ImportFormatError, InvalidEntryError
from skillrl_core.files import atomic_write_text

if TYPE_CHECKING:
    from memory.bank import SkillBank

FORMATS = ("jsonl", "skillrl")
SKILL_KEYS = ("title", "principle", "when_to_apply")
MISTAKE_KEYS = ("description", "why_it_happens", "how_to_avoid")
SKILLRL_SOURCE = "import:skillrl"
"""``source`` of imported SkillRL entries; a mapped task skill adds ``:<its SkillRL category>``."""


@dataclass
class ImportReport:
    """What an import did."""

    records: int
    """Records read from the file."""
    added: list[str] = field(default_factory=list)
    """Ids of new entries."""
    merged: list[str] = field(default_factory=list)
    """Ids of existing entries that near-duplicates merged into."""


def _read(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise DataFileError(f"cannot read {path}: {e}") from e


# ------------------------------------------------------------------------------------ JSONL


def export_jsonl(bank: SkillBank, path: Path, *, status: str | None = None) -> int:
    """Write every entry (``status`` None: active and retired) as one JSON object per line."""
    entries = bank.list(status=status)
    lines = [json.dumps(dataclasses.asdict(e), ensure_ascii=False) for e in entries]
    atomic_write_text(path, "".join(line + "\n" for line in lines), create_folder=False)
    return len(entries)


PROVENANCE_TEXT = ("source", "author", "reason")
PROVENANCE_KEYS = frozenset(PROVENANCE_TEXT + ("trajectory_ids", "external_id", "similarity",
                                               "created_at"))  # fmt: skip
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
    for name in STAT_FIELDS + ("revision",):
        value = data.get(name, 1 if name in POSITIVE_FIELDS else 0)
        low = 1 if name in POSITIVE_FIELDS else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ImportFormatError(
                f"{where}: field {name!r} ({value!r}) must be an integer >= {low}"
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


def import_jsonl(bank: SkillBank, path: Path, *, author: str = "import") -> ImportReport:
    """Insert the full records of a JSONL export (ids kept; an existing id is an error)."""
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(_read(path).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:
            raise ImportFormatError(f"{where}: not valid JSON ({e.msg})") from e
        entry = _entry_record(data, where)
        if entry.id in seen:
            raise ImportFormatError(f"{where}: id {entry.id} repeats line {seen[entry.id]}")
        seen[entry.id] = number
        entries.append(entry)
    existing = bank.entries(list(seen))
    if existing:
        first = min(existing, key=lambda i: seen[i])
        raise ImportFormatError(
            f"{path}:{seen[first]}: an entry with id {first} is already in the bank "
            "(nothing was imported)"
        )
    insert_entries(bank.store, entries, author=author)
    return ImportReport(records=len(entries), added=[e.id for e in entries])


# ------------------------------------------------------------------------------------ SkillRL


def _text_fields(record: Any, keys: Iterable[str], where: str) -> dict[str, str]:
    if not isinstance(record, dict):
        raise ImportFormatError(f"{where}: expected an object, got {type(record).__name__}")
    out = {}
    for key in keys:
        value = record.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ImportFormatError(f"{where}.{key}: missing or not a non-empty string")
        out[key] = value
    return out


def _list_at(data: dict[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise ImportFormatError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def parse_skillrl(
    data: Any, *, env: str, source: str, category_map: Mapping[str, str] | None = None
) -> list[EntryDraft]:
    """Drafts from a parsed SkillRL bank; malformed records raise with their JSON path.

    ``category_map`` renames task categories (unlisted ones stay as they are); a renamed skill's
    ``source`` becomes ``<source>:<SkillRL category>`` and its ``reason`` says what was mapped.
    """
    category_map = category_map or {}
    if not isinstance(data, dict):
        raise ImportFormatError("$: a SkillRL bank is a JSON object")
    if not any(k in data for k in ("general_skills", "task_specific_skills", "common_mistakes")):
        raise ImportFormatError(
            "$: none of general_skills, task_specific_skills, common_mistakes is present"
        )
    drafts: list[EntryDraft] = []
    for i, record in enumerate(_list_at(data, "general_skills", "$.general_skills")):
        where = f"$.general_skills[{i}]"
        fields = _text_fields(record, SKILL_KEYS[:2], where)
        drafts.append(_skill_draft("general", record, fields, None, None, source))
    by_category = data.get("task_specific_skills", {})
    if not isinstance(by_category, dict):
        raise ImportFormatError("$.task_specific_skills: expected an object of categories")
    for category in by_category:
        where = f"$.task_specific_skills.{category}"
        target = category_map.get(category, category)
        for i, record in enumerate(_list_at(by_category, category, where)):
            fields = _text_fields(record, SKILL_KEYS[:2], f"{where}[{i}]")
            draft = _skill_draft("task", record, fields, env, target, source)
            if target != category:
                draft.source = f"{source}:{category}"
                draft.reason = f"SkillRL category {category!r} imported as {target!r}"
            drafts.append(draft)
    for i, record in enumerate(_list_at(data, "common_mistakes", "$.common_mistakes")):
        fields = _text_fields(record, MISTAKE_KEYS, f"$.common_mistakes[{i}]")
        drafts.append(
            EntryDraft(
                kind="mistake",
                title=fields["description"],
                principle=fields["how_to_avoid"],
                failure_point=fields["why_it_happens"],
                env=env,
                source=source,
                external_id=_external_id(record.get("mistake_id")),
            )
        )
    for i, draft in enumerate(drafts):
        try:
            validate_draft(normalise_draft(draft))
        except InvalidEntryError as e:
            raise ImportFormatError(
                f"record {i} ({draft.external_id or draft.title!r}): {e}"
            ) from e
    return drafts


def _external_id(value: Any) -> str | None:
    return None if value is None else str(value)


def _skill_draft(
    kind: str,
    record: dict[str, Any],
    fields: dict[str, str],
    env: str | None,
    category: str | None,
    source: str,
) -> EntryDraft:
    when = record.get("when_to_apply", "")
    return EntryDraft(
        kind=kind,  # type: ignore[arg-type]
        title=fields["title"],
        principle=fields["principle"],
        when_to_apply=when if isinstance(when, str) else str(when),
        env=env,
        category=category,
        source=source,
        external_id=_external_id(record.get("skill_id")),
    )


def import_skillrl(
    bank: SkillBank,
    path: Path,
    *,
    env: str = "webshop",
    author: str = "import",
    category_map: Mapping[str, str] | None = None,
) -> ImportReport:
    """Add a SkillRL bank's skills and mistakes (near-duplicates merge, as with any add).

    ``category_map``: SkillRL category -> ``env`` category for task skills (module docstring).
    """
    try:
        data = json.loads(_read(path))
    except json.JSONDecodeError as e:
        raise ImportFormatError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from e
    try:
        drafts = parse_skillrl(data, env=env, source=SKILLRL_SOURCE, category_map=category_map)
    except ImportFormatError as e:
        raise ImportFormatError(f"{path}: {e}") from e
    results = bank.add_many(drafts, author=author)
    report = ImportReport(records=len(drafts))
    for result in results:
        (report.merged if result.merged else report.added).append(result.entry.id)
    return report


def to_skillrl(entries: list[Entry], *, env: str | None = None) -> dict[str, Any]:
    """Lay ``entries`` out as a SkillRL bank (with ``env``, other envs' entries are left out)."""
    counters = {"general": 0, "task": 0, "mistake": 0}

    def next_id(kind: str, prefix: str, external: str | None) -> str:
        counters[kind] += 1
        return external or f"{prefix}_{counters[kind]:03d}"

    out: dict[str, Any] = {"general_skills": [], "task_specific_skills": {}, "common_mistakes": []}
    for e in entries:
        if e.kind != "general" and env is not None and e.env != env:
            continue
        if e.kind == "mistake":
            description = e.title
            if e.flawed_action:
                description = f"{e.title} (flawed action: {e.flawed_action})"
            how = f"{e.correction} {e.principle}" if e.correction else e.principle
            out["common_mistakes"].append(
                {
                    "mistake_id": next_id("mistake", "err", e.external_id),
                    "description": description,
                    "why_it_happens": e.failure_point,
                    "how_to_avoid": how,
                }
            )
            continue
        category = skillrl_category(e)
        prefix = "gen" if e.kind == "general" else (category or "tsk")[:3]
        skill = {
            "skill_id": next_id(e.kind, prefix, e.external_id),
            "title": e.title,
            "principle": e.principle,
            "when_to_apply": e.when_to_apply,
        }
        if e.kind == "general":
            out["general_skills"].append(skill)
        else:
            out["task_specific_skills"].setdefault(category or "other", []).append(skill)
    out["metadata"] = {"source": "skillrl export", "env": env, "entries": len(entries)}
    return out


def skillrl_category(entry: Entry) -> str | None:
    """Return the category ``entry`` had in SkillRL's bank (its own when it was not mapped)."""
    prefix = f"{SKILLRL_SOURCE}:"
    if entry.kind == "task" and entry.source.startswith(prefix) and entry.source != prefix:
        return entry.source[len(prefix) :]
    return entry.category


def export_skillrl(bank: SkillBank, path: Path, *, env: str | None = None) -> int:
    """Write the active entries in SkillRL's JSON layout; returns how many were written."""
    entries = bank.list(status="active")
    data = to_skillrl(entries, env=env)
    atomic_write_text(
        path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", create_folder=False
    )
    return len(entries)
