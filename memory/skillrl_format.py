"""SkillRL's published skill-bank JSON (the paper's format): import and export.

An import is all-or-nothing: every record is parsed and validated first, and a malformed one is
reported with its JSON path before anything is written; the writes then happen in one
transaction. An export is written atomically (temp file + rename) into an existing folder.

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

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.entries import normalise_draft, validate_draft
from memory.jsonl_format import CheckedRecord, ImportReport, read_utf8, written_title
from memory.types import Entry, EntryDraft
from skillrl_core.errors import ImportFormatError, InvalidEntryError
from skillrl_core.files import atomic_write_text

if TYPE_CHECKING:
    from memory.bank import SkillBank

SKILL_KEYS = ("title", "principle", "when_to_apply")
MISTAKE_KEYS = ("description", "why_it_happens", "how_to_avoid")
SKILLRL_SOURCE = "import:skillrl"
"""``source`` of imported SkillRL entries; a mapped task skill adds ``:<its SkillRL category>``."""


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
    """Drafts from a parsed SkillRL bank; the first malformed record raises with its JSON path.

    ``category_map`` renames task categories (unlisted ones stay as they are); a renamed skill's
    ``source`` becomes ``<source>:<SkillRL category>`` and its ``reason`` says what was mapped.
    """
    records = check_skillrl(data, env=env, source=source, category_map=category_map)
    refused = [r for r in records if r.error]
    if refused:
        raise ImportFormatError(refused[0].error)
    return [r.item for r in records if isinstance(r.item, EntryDraft)]


def check_skillrl(
    data: Any, *, env: str, source: str, category_map: Mapping[str, str] | None = None
) -> list[CheckedRecord]:
    """Every record of a parsed SkillRL bank, as its draft or with why it is refused.

    Each record is checked on its own, so all the bad ones are found; a document that is not a
    SkillRL bank at all (no object, no known section, a section of the wrong type) raises.
    """
    if not isinstance(data, dict):
        raise ImportFormatError("$: a SkillRL bank is a JSON object")
    if not any(k in data for k in ("general_skills", "task_specific_skills", "common_mistakes")):
        raise ImportFormatError(
            "$: none of general_skills, task_specific_skills, common_mistakes is present"
        )
    # (where, kind, record, SkillRL category) of every record, in file order.
    found: list[tuple[str, str, Any, str | None]] = [
        (f"$.general_skills[{i}]", "general", record, None)
        for i, record in enumerate(_list_at(data, "general_skills", "$.general_skills"))
    ]
    by_category = data.get("task_specific_skills", {})
    if not isinstance(by_category, dict):
        raise ImportFormatError("$.task_specific_skills: expected an object of categories")
    for category in by_category:
        where = f"$.task_specific_skills.{category}"
        for i, record in enumerate(_list_at(by_category, category, where)):
            found.append((f"{where}[{i}]", "task", record, category))
    for i, record in enumerate(_list_at(data, "common_mistakes", "$.common_mistakes")):
        found.append((f"$.common_mistakes[{i}]", "mistake", record, None))
    records: list[CheckedRecord] = []
    for where, kind, record, category in found:
        title = written_title(record, "description" if kind == "mistake" else "title")
        try:
            draft = _draft(kind, record, where, env, category, category_map or {}, source)
            validate_draft(normalise_draft(draft))
        except ImportFormatError as e:
            records.append(CheckedRecord(where, None, str(e), title=title))
        except InvalidEntryError as e:
            records.append(CheckedRecord(where, None, f"{where}: {e}", title=title))
        else:
            records.append(CheckedRecord(where, draft, title=title))
    return records


def _draft(
    kind: str,
    record: Any,
    where: str,
    env: str,
    category: str | None,
    category_map: Mapping[str, str],
    source: str,
) -> EntryDraft:
    """One SkillRL record as a draft; a missing text field raises with its JSON path."""
    if kind == "mistake":
        fields = _text_fields(record, MISTAKE_KEYS, where)
        return EntryDraft(
            kind="mistake",
            title=fields["description"],
            principle=fields["how_to_avoid"],
            failure_point=fields["why_it_happens"],
            env=env,
            source=source,
            external_id=_external_id(record.get("mistake_id")),
        )
    fields = _text_fields(record, SKILL_KEYS[:2], where)
    if kind == "general" or category is None:
        return _skill_draft("general", record, fields, None, None, source)
    target = category_map.get(category, category)
    draft = _skill_draft("task", record, fields, env, target, source)
    if target != category:
        draft.source = f"{source}:{category}"
        draft.reason = f"SkillRL category {category!r} imported as {target!r}"
    return draft


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


def check_skillrl_file(
    path: Path, *, env: str, category_map: Mapping[str, str] | None = None
) -> list[CheckedRecord]:
    """Read a SkillRL bank file and check every record (:func:`check_skillrl`).

    A file that cannot be read, is not JSON or is not a SkillRL bank raises, naming the file.
    """
    try:
        data = json.loads(read_utf8(path))
    except json.JSONDecodeError as e:
        raise ImportFormatError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from e
    except RecursionError as e:
        raise ImportFormatError(f"{path}: not valid JSON (nested too deeply)") from e
    try:
        return check_skillrl(data, env=env, source=SKILLRL_SOURCE, category_map=category_map)
    except ImportFormatError as e:
        raise ImportFormatError(f"{path}: {e}") from e


def import_skillrl(
    bank: SkillBank,
    path: Path,
    *,
    env: str,
    author: str = "import",
    category_map: Mapping[str, str] | None = None,
) -> ImportReport:
    """Add a SkillRL bank's skills and mistakes (near-duplicates merge, as with any add).

    ``category_map``: SkillRL category -> ``env`` category for task skills (module docstring).
    """
    records = check_skillrl_file(path, env=env, category_map=category_map)
    refused = [r for r in records if r.error]
    if refused:
        raise ImportFormatError(f"{path}: {refused[0].error}")
    drafts = [r.item for r in records if isinstance(r.item, EntryDraft)]
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
