"""Placing new drafts: merge each into an active near-duplicate, or make a new entry.

A draft merges into the most similar active entry of its partition (same kind; same env and
category for task skills; same env and category for notes) when the cosine similarity reaches
``merge_threshold``: the entry's ``support_count`` grows and a provenance record is appended.
Drafts earlier in the same batch count as candidates too.

The search is exact and deterministic: the candidates are the partition's active entries in SQL
(oldest first) with their stored vectors, and a tie goes to the oldest entry. An approximate
top-1 index query was not enough here: with several identical vectors (the same lesson noted in
several categories) its answer could change from run to run, so a resumed training run did not
always rebuild the same bank.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from memory.entries import content_of_draft
from memory.index import partition_of
from memory.models import EntryRow, ProvenanceRow, utcnow
from memory.revisions import add_revision
from memory.types import EntryDraft

if TYPE_CHECKING:
    from memory.store import BankStore


def place_drafts(
    store: BankStore, session: Session, drafts: list[EntryDraft], vectors: np.ndarray, author: str
) -> tuple[list[tuple[str, bool, float | None]], list[EntryRow], list[np.ndarray]]:
    """Merge each draft into its best match above the threshold, or make a new row."""
    results: list[tuple[str, bool, float | None]] = []
    new_rows: list[EntryRow] = []
    new_vectors: list[np.ndarray] = []
    stored: dict[tuple[str, str, str], list[tuple[str, np.ndarray]]] = {}
    for draft, vector in zip(drafts, vectors, strict=False):
        key = _scope(draft.kind, draft.env, draft.category)
        if key not in stored:  # merges change no vector: one read per scope per batch
            stored[key] = _stored_candidates(store, session, draft)
        # Drafts earlier in this batch are not in the index yet: they are candidates too, after
        # the stored entries (so that a tie still goes to the oldest).
        earlier = [
            (row.id, other)
            for row, other in zip(new_rows, new_vectors, strict=False)
            if _scope(row.kind, row.env, row.category) == key
        ]
        target, similarity = _merge_target(store, vector, stored[key] + earlier)
        if target is not None:
            session.execute(
                update(EntryRow)
                .where(EntryRow.id == target)
                .values(support_count=EntryRow.support_count + 1, updated_at=utcnow())
            )
            session.add(_provenance(target, draft, author, similarity))
            results.append((target, True, similarity))
            continue
        row = EntryRow(
            id=uuid.uuid4().hex,
            **content_of_draft(draft),
            status="active",
            revision=1,
            support_count=1,
            times_retrieved=0,
            episodes_retrieved=0,
            success_episodes=0,
            failure_episodes=0,
        )
        session.add(row)
        session.flush()
        add_revision(session, row, author=author, reason=draft.reason or "added")
        session.add(_provenance(row.id, draft, author, None))
        new_rows.append(row)
        new_vectors.append(vector)
        results.append((row.id, False, None))
    return results, new_rows, new_vectors


def _merge_target(
    store: BankStore, vector: np.ndarray, candidates: list[tuple[str, np.ndarray]]
) -> tuple[str | None, float | None]:
    """Pick the most similar candidate at or above the threshold; the first one wins a tie."""
    best_id: str | None = None
    best: float | None = None
    for entry_id, other in candidates:
        similarity = float(np.dot(other, vector))
        if similarity >= store.config.merge_threshold and (best is None or similarity > best):
            best_id, best = entry_id, similarity
    return best_id, best


def _scope(kind: str, env: str | None, category: str | None) -> tuple[str, str, str]:
    """Entries that may merge share this: the kind, plus env and category except for general."""
    return ("general", "", "") if kind == "general" else (kind, env or "", category or "")


def _stored_candidates(
    store: BankStore, session: Session, draft: EntryDraft
) -> list[tuple[str, np.ndarray]]:
    """Active entries a draft may merge into, oldest first, with their indexed vectors."""
    query = select(EntryRow.id).where(EntryRow.status == "active", EntryRow.kind == draft.kind)
    if draft.kind != "general":
        query = query.where(
            func.coalesce(EntryRow.env, "") == (draft.env or ""),
            func.coalesce(EntryRow.category, "") == (draft.category or ""),
        )
    ids = list(session.scalars(query.order_by(EntryRow.created_at, EntryRow.id)))
    key = partition_of({"kind": draft.kind, "env": draft.env, "category": draft.category})
    vectors = store.index.vectors(ids, key)
    return [(entry_id, vectors[entry_id]) for entry_id in ids if entry_id in vectors]


def _provenance(
    entry_id: str, draft: EntryDraft, author: str, similarity: float | None
) -> ProvenanceRow:
    return ProvenanceRow(
        entry_id=entry_id,
        source=draft.source,
        author=author,
        trajectory_ids=list(draft.trajectory_ids),
        reason=draft.reason,
        external_id=draft.external_id,
        similarity=similarity,
    )
