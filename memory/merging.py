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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Placement:
    """Where one draft of a batch goes: merged into an entry or an earlier draft, or new."""

    entry_id: str | None = None
    """The stored entry it merges into (None: it does not merge into a stored entry)."""
    draft: int | None = None
    """Position of the earlier, new draft of the same batch it merges into."""
    similarity: float | None = None
    """Cosine similarity to what it merges into (None when it is new)."""

    @property
    def merged(self) -> bool:
        """Whether the draft merges instead of becoming a new entry."""
        return self.entry_id is not None or self.draft is not None


def plan_placements(
    store: BankStore, session: Session, drafts: list[EntryDraft], vectors: np.ndarray
) -> list[Placement]:
    """Decide where each draft goes, writing nothing (``skills import --dry-run`` shows this)."""
    placements: list[Placement] = []
    stored: dict[tuple[str, str, str], list[tuple[str | int, np.ndarray]]] = {}
    new: list[int] = []
    for position, (draft, vector) in enumerate(zip(drafts, vectors, strict=False)):
        key = _scope_of(draft)
        if key not in stored:  # merges change no vector: one read per scope per batch
            stored[key] = list(_stored_candidates(store, session, draft))
        # Drafts earlier in this batch are not in the index yet: they are candidates too, after
        # the stored entries (so that a tie still goes to the oldest).
        earlier: list[tuple[str | int, np.ndarray]] = [
            (j, vectors[j]) for j in new if _scope_of(drafts[j]) == key
        ]
        target, similarity = _merge_target(store, vector, stored[key] + earlier)
        if target is None:
            new.append(position)
            placements.append(Placement())
        elif isinstance(target, int):
            placements.append(Placement(draft=target, similarity=similarity))
        else:
            placements.append(Placement(entry_id=target, similarity=similarity))
    return placements


def place_drafts(
    store: BankStore, session: Session, drafts: list[EntryDraft], vectors: np.ndarray, author: str
) -> tuple[list[tuple[str, bool, float | None]], list[EntryRow], list[np.ndarray]]:
    """Merge each draft into its best match above the threshold, or make a new row."""
    results: list[tuple[str, bool, float | None]] = []
    new_rows: list[EntryRow] = []
    new_vectors: list[np.ndarray] = []
    row_of_draft: dict[int, str] = {}
    placements = plan_placements(store, session, drafts, vectors)
    for position, (draft, vector, placement) in enumerate(
        zip(drafts, vectors, placements, strict=False)
    ):
        if placement.merged:
            target = placement.entry_id
            if target is None:  # an earlier draft of this batch, made a row above
                target = row_of_draft[int(placement.draft or 0)]
            session.execute(
                update(EntryRow)
                .where(EntryRow.id == target)
                .values(support_count=EntryRow.support_count + 1, updated_at=utcnow())
            )
            session.add(_provenance(target, draft, author, placement.similarity))
            results.append((target, True, placement.similarity))
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
        row_of_draft[position] = row.id
        new_rows.append(row)
        new_vectors.append(vector)
        results.append((row.id, False, None))
    return results, new_rows, new_vectors


def _merge_target(
    store: BankStore, vector: np.ndarray, candidates: list[tuple[str | int, np.ndarray]]
) -> tuple[str | int | None, float | None]:
    """Pick the most similar candidate at or above the threshold; the first one wins a tie."""
    best_id: str | int | None = None
    best: float | None = None
    for entry_id, other in candidates:
        similarity = float(np.dot(other, vector))
        if similarity >= store.config.merge_threshold and (best is None or similarity > best):
            best_id, best = entry_id, similarity
    return best_id, best


def _scope(kind: str, env: str | None, category: str | None) -> tuple[str, str, str]:
    """Entries that may merge share this: the kind, plus env and category except for general."""
    return ("general", "", "") if kind == "general" else (kind, env or "", category or "")


def _scope_of(draft: EntryDraft) -> tuple[str, str, str]:
    return _scope(draft.kind, draft.env, draft.category)


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
