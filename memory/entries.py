"""Validation of entry fields and conversion between ORM rows, dataclasses and index metadata."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Engine, select

from memory.db import read_session
from memory.models import EntryRow, ProvenanceRow
from memory.types import ENTRY_KINDS, Entry, EntryDraft
from skillrl_core.errors import InvalidEntryError
from skillrl_core.text import hidden_character

CONTENT_FIELDS: tuple[str, ...] = (
    "kind",
    "title",
    "principle",
    "when_to_apply",
    "env",
    "category",
    "failure_point",
    "flawed_action",
    "correction",
    "source",
    "reason",
    "external_id",
    "offers",
)
"""Fields a revision records (plus ``status``)."""
EDITABLE_FIELDS: frozenset[str] = frozenset(CONTENT_FIELDS) - {"source", "reason"}
"""Fields ``SkillBank.edit`` may change (``reason`` there is the edit's own reason)."""
STATUSES: tuple[str, ...] = ("active", "retired")
COUNTER_FIELDS: tuple[str, ...] = (
    "support_count",
    "times_retrieved",
    "episodes_retrieved",
    "success_episodes",
    "failure_episodes",
    "paired_pairs",
    "paired_with_only",
    "paired_without_only",
)
"""Usage statistics that count something (integers >= 0)."""
STAT_FIELDS: tuple[str, ...] = (*COUNTER_FIELDS, "paired_score_delta_sum")
"""Every usage statistic an entry carries (kept by exports and imports)."""
MISTAKE_ONLY: tuple[str, ...] = ("failure_point", "flawed_action", "correction")
"""Fields only a counterfactual note has (a skill's text would silently never show them)."""
MAX_TITLE = 300
MAX_TEXT = 8000
MAX_ID = 32
"""Characters of an entry id (the width of the id column)."""
_OPTIONAL_STR = ("env", "category", "external_id")


def check_entry_id(text: str, *, option: str = "id") -> None:
    """Refuse an entry id (or prefix) no bank can hold: empty, blank, too long, or unprintable.

    The id column is ``MAX_ID`` characters (PostgreSQL enforces it; SQLite would not), and an
    id is typed on command lines, so it holds no whitespace or control character.
    """
    if not text or len(text) > MAX_ID or not text.isprintable() or any(c.isspace() for c in text):
        raise InvalidEntryError(
            f"{option} ({text[:40]!r}{'...' if len(text) > 40 else ''}) is not an entry id: "
            f"ids are 1-{MAX_ID} characters without spaces or control characters "
            "(see `skillrl skills list`)"
        )


def validate_draft(draft: EntryDraft) -> None:
    """Raise :class:`InvalidEntryError` naming the first invalid field of ``draft``."""
    if draft.kind not in ENTRY_KINDS:
        raise InvalidEntryError(f"kind ({draft.kind!r}) must be one of {', '.join(ENTRY_KINDS)}")
    for name in CONTENT_FIELDS:
        value = getattr(draft, name)
        if name in _OPTIONAL_STR and value is None:
            continue
        if not isinstance(value, str):
            raise InvalidEntryError(f"{name} must be text, got {type(value).__name__}")
        if "\x00" in value:  # SQLite stores NUL, PostgreSQL refuses it: keep banks portable
            raise InvalidEntryError(f"{name} contains a NUL character")
        limit = MAX_TITLE if name == "title" else MAX_TEXT
        if len(value) > limit:
            raise InvalidEntryError(f"{name} is {len(value)} characters long (max {limit})")
        hidden = hidden_character(value)
        if hidden is not None:  # it would act on a terminal, or hide text from a reader
            raise InvalidEntryError(f"{name} contains {hidden}; entries hold plain text only")
    if not draft.title.strip():
        raise InvalidEntryError("title must not be empty")
    if not draft.principle.strip():
        raise InvalidEntryError("principle must not be empty")
    if draft.kind != "mistake":
        for name in MISTAKE_ONLY:
            if getattr(draft, name):
                raise InvalidEntryError(
                    f"{name} is for mistake notes only (this entry is a {draft.kind} skill); "
                    "leave it empty"
                )
    if draft.offers and draft.kind != "case":
        raise InvalidEntryError(
            f"offers is for cases only (this entry is a {draft.kind} entry); leave it empty"
        )
    if draft.kind == "task" and not (draft.env and draft.category):
        raise InvalidEntryError("a task skill needs both env and category (<env>/<category>)")
    if not isinstance(draft.trajectory_ids, list) or not all(
        isinstance(t, str) and "\x00" not in t for t in draft.trajectory_ids
    ):
        raise InvalidEntryError("trajectory_ids must be a list of episode ids (text, no NUL)")


def normalise_draft(draft: EntryDraft) -> EntryDraft:
    """Return a copy with whitespace stripped and empty env/category/external_id as None."""
    changes: dict[str, Any] = {}
    for name in CONTENT_FIELDS:
        value = getattr(draft, name)
        if isinstance(value, str):
            value = value.strip()
            if name in _OPTIONAL_STR and not value:
                value = None
            changes[name] = value
    return dataclasses.replace(draft, **changes)


def iso(moment: datetime | None) -> str:
    """ISO-8601 text of a stored time (SQLite hands back naive UTC)."""
    if moment is None:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.isoformat()


def content_of(row: EntryRow) -> dict[str, Any]:
    """Return the content fields and status of ``row`` (what revisions and snapshots store)."""
    data = {name: getattr(row, name) for name in CONTENT_FIELDS}
    data["status"] = row.status
    return data


def content_of_draft(draft: EntryDraft) -> dict[str, Any]:
    """Return the stored content fields of a draft."""
    return {name: getattr(draft, name) for name in CONTENT_FIELDS}


def draft_of(row: EntryRow) -> EntryDraft:
    """Return the row's content as a draft (for validating edits and embedding)."""
    return EntryDraft(**{name: getattr(row, name) for name in CONTENT_FIELDS})


def provenance_dict(row: ProvenanceRow) -> dict[str, Any]:
    """Return a provenance row as plain data."""
    return {
        "source": row.source,
        "author": row.author,
        "trajectory_ids": list(row.trajectory_ids or []),
        "reason": row.reason,
        "external_id": row.external_id,
        "similarity": row.similarity,
        "created_at": iso(row.created_at),
    }


def entry_from_row(row: EntryRow, provenance: list[ProvenanceRow] | None = None) -> Entry:
    """Return the dataclass view of a stored entry."""
    prov = [provenance_dict(p) for p in provenance or []]
    trajectories = sorted({t for p in prov for t in p["trajectory_ids"]})
    return Entry(
        **{name: getattr(row, name) for name in CONTENT_FIELDS},
        trajectory_ids=trajectories,
        id=row.id,
        status=row.status,  # type: ignore[arg-type]
        revision=row.revision,
        provenance=prov,
        **{name: getattr(row, name) for name in STAT_FIELDS},
        created_at=iso(row.created_at),
        updated_at=iso(row.updated_at),
    )


def index_metadata(row: EntryRow) -> dict[str, Any]:
    """Return what the index stores next to an entry's vector (partition and revision)."""
    return {
        "kind": row.kind,
        "env": row.env or "",
        "category": row.category or "",
        "revision": row.revision,
    }


def read_entries(engine: Engine, ids: list[str]) -> dict[str, Entry]:
    """Entries by id from SQL (ids that do not exist are left out), provenance included."""
    if not ids:
        return {}
    with read_session(engine) as session:
        rows = session.scalars(select(EntryRow).where(EntryRow.id.in_(ids))).all()
        provenance = session.scalars(
            select(ProvenanceRow).where(ProvenanceRow.entry_id.in_(ids)).order_by(ProvenanceRow.id)
        ).all()
    by_entry: dict[str, list[ProvenanceRow]] = {}
    for row in provenance:
        by_entry.setdefault(row.entry_id, []).append(row)
    return {r.id: entry_from_row(r, by_entry.get(r.id, [])) for r in rows}
