"""Placing new drafts: merge each into an active near-duplicate, or make a new entry.

A draft merges into the most similar active entry of its partition (same kind; same env and
category for task skills; same env and category for notes) when the cosine similarity reaches
``merge_threshold``: the entry's ``support_count`` grows and a provenance record is appended.
Drafts earlier in the same batch count as candidates too.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import update
from sqlalchemy.orm import Session

from memory.entries import content_of_draft
from memory.index import partition_of
from memory.models import EntryRow, ProvenanceRow, utcnow
from memory.revisions import add_revision
from memory.types import EntryDraft

if TYPE_CHECKING:
    from memory.bank import SkillBank


def place_drafts(
    bank: SkillBank, session: Session, drafts: list[EntryDraft], vectors: np.ndarray, author: str
) -> tuple[list[tuple[str, bool, float | None]], list[EntryRow], list[np.ndarray]]:
    """Merge each draft into its best match above the threshold, or make a new row."""
    results: list[tuple[str, bool, float | None]] = []
    new_rows: list[EntryRow] = []
    new_vectors: list[np.ndarray] = []
    for draft, vector in zip(drafts, vectors, strict=False):
        target, similarity = _merge_target(bank, draft, vector, new_rows, new_vectors)
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
    bank: SkillBank,
    draft: EntryDraft,
    vector: np.ndarray,
    new_rows: list[EntryRow],
    new_vectors: list[np.ndarray],
) -> tuple[str | None, float | None]:
    best_id: str | None = None
    best = bank.config.merge_threshold
    key = partition_of({"kind": draft.kind, "env": draft.env, "category": draft.category})
    where = {"category": draft.category or ""} if draft.kind == "mistake" else None
    hits = bank.index.query(vector[None, :], 1, key, where)
    for hit in hits[0]:
        if hit.similarity is not None and hit.similarity >= best:
            best_id, best = hit.id, hit.similarity
    # Drafts earlier in the same batch are not in the index yet: compare with them directly.
    for row, other in zip(new_rows, new_vectors, strict=False):
        same_key = row.kind == draft.kind and (
            draft.kind == "general" or (row.env, row.category) == (draft.env, draft.category)
        )
        similarity = float(np.dot(other, vector))
        if same_key and similarity >= best:
            best_id, best = row.id, similarity
    return best_id, (best if best_id is not None else None)


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
