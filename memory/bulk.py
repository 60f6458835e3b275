"""Inserting full entry records as they are (ids, status, revision, statistics kept).

Used by JSONL import, which moves a bank between workspaces; adding drafts (with merging) is
``SkillBank.add_many``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from memory.entries import CONTENT_FIELDS, STAT_FIELDS, normalise_draft
from memory.models import EntryRow, ProvenanceRow, utcnow
from memory.revisions import add_revision
from memory.types import Entry

if TYPE_CHECKING:
    from memory.store import BankStore


def _time(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text) if text else utcnow()
    except ValueError:
        return utcnow()


def _row(entry: Entry) -> EntryRow:
    draft = normalise_draft(entry)
    return EntryRow(
        id=entry.id,
        **{name: getattr(draft, name) for name in CONTENT_FIELDS},
        status=entry.status,
        revision=entry.revision,
        **{name: getattr(entry, name) for name in STAT_FIELDS},
        created_at=_time(entry.created_at),
        updated_at=_time(entry.updated_at),
    )


def _provenance(entry: Entry) -> list[ProvenanceRow]:
    records = entry.provenance or [
        {"source": entry.source, "author": "import", "trajectory_ids": entry.trajectory_ids}
    ]
    return [
        ProvenanceRow(
            entry_id=entry.id,
            source=str(p.get("source", entry.source)),
            author=str(p.get("author", "import")),
            trajectory_ids=list(p.get("trajectory_ids") or []),
            reason=str(p.get("reason") or ""),
            external_id=p.get("external_id"),
            similarity=p.get("similarity"),
            created_at=_time(str(p.get("created_at") or "")),
        )
        for p in records
    ]


def insert_entries(store: BankStore, entries: list[Entry], *, author: str) -> None:
    """Insert ``entries`` in one transaction and index the active ones (all or nothing)."""
    store.require_writable()  # before loading the model
    rows = [_row(e) for e in entries]
    active = [r for r in rows if r.status == "active"]
    texts = [normalise_draft(e).text_for_embedding() for e in entries if e.status == "active"]
    vectors = store.embedder.embed(texts) if texts else np.zeros((0, 1), dtype=np.float32)
    with store.transaction() as (session, undo):
        session.add_all(rows)
        session.flush()
        for entry, row in zip(entries, rows, strict=True):
            add_revision(session, row, author=author, reason="imported")
            session.add_all(_provenance(entry))
        session.flush()
        if active:
            store.index_upsert(active, vectors, undo)
