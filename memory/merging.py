"""Placing new drafts: merge each into an active near-duplicate, or make a new entry.

A draft merges into the most similar active entry of its partition (same kind; same env and
category for task skills; same env and category for notes) when the cosine similarity reaches
``merge_threshold``: the entry's ``support_count`` grows and a provenance record is appended.
Drafts earlier in the same batch count as candidates too.

A note with no near-duplicate in its own category that reads word for word like an active note
of its env in another category merges into that note, which becomes a note of every category
(``category`` None). Notes are retrieved env-wide, so a copy per category taught nothing more,
and it made which copy a turn was served depend on which copy was written first.

The search is exact and deterministic: the candidates are the partition's active entries in SQL
(oldest first) with their stored vectors, and a tie goes to the oldest entry. An approximate
top-1 index query was not enough here: with several identical vectors its answer could change
from run to run, so a resumed training run did not always rebuild the same bank.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from memory.entries import content_of_draft, draft_of
from memory.index import partition_of
from memory.models import EntryRow, ProvenanceRow, utcnow
from memory.revisions import add_revision
from memory.types import EntryDraft

if TYPE_CHECKING:
    from memory.store import BankStore


@dataclass
class Placement:
    """Where a batch of drafts went, and the rows whose index records must be (re)written."""

    results: list[tuple[str, bool, float | None]] = field(default_factory=list)
    """Per draft: the entry it made or merged into, whether it merged, the merge similarity."""
    index_rows: list[EntryRow] = field(default_factory=list)
    """New entries, and stored notes that became notes of every category."""
    index_vectors: list[np.ndarray] = field(default_factory=list)
    """The vector of each of ``index_rows``."""


def place_drafts(
    store: BankStore, session: Session, drafts: list[EntryDraft], vectors: np.ndarray, author: str
) -> Placement:
    """Merge each draft into its best match above the threshold, or make a new row."""
    placement = Placement()
    new_rows: list[EntryRow] = []
    new_vectors: list[np.ndarray] = []
    stored: dict[tuple[str, str, str], list[tuple[str, np.ndarray]]] = {}
    copies = _NoteCopies(session)
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
        if target is None and draft.kind == "mistake":
            target = copies.find(draft)
            similarity = None if target is None else 1.0  # the same text
            widened = copies.widen(target, draft, author) if target else None
            if widened is not None:
                # It left its category's scope: read this env's note scopes again.
                stored = {k: v for k, v in stored.items() if k[:2] != key[:2]}
                if widened not in new_rows:  # this batch's rows are indexed below as they are
                    partition = partition_of({"kind": "mistake", "env": widened.env})
                    placement.index_rows.append(widened)
                    placement.index_vectors.append(
                        store.index.vectors([widened.id], partition).get(widened.id, vector)
                    )
        if target is not None:
            session.execute(
                update(EntryRow)
                .where(EntryRow.id == target)
                .values(support_count=EntryRow.support_count + 1, updated_at=utcnow())
            )
            session.add(_provenance(target, draft, author, similarity))
            placement.results.append((target, True, similarity))
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
        copies.add(row)
        placement.results.append((row.id, False, None))
    placement.index_rows[:0] = new_rows
    placement.index_vectors[:0] = new_vectors
    return placement


class _NoteCopies:
    """Active notes by env and embedded text, to find a word-for-word copy in another category."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._by_env: dict[str, dict[str, str]] = {}
        """env -> note text -> id of the oldest active note with that text (read once per env)."""

    def _texts(self, env: str) -> dict[str, str]:
        if env not in self._by_env:
            rows = self._session.scalars(
                select(EntryRow)
                .where(
                    EntryRow.status == "active",
                    EntryRow.kind == "mistake",
                    func.coalesce(EntryRow.env, "") == env,
                )
                .order_by(EntryRow.created_at, EntryRow.id)
            )
            texts: dict[str, str] = {}
            for row in rows:
                texts.setdefault(draft_of(row).text_for_embedding(), row.id)
            self._by_env[env] = texts
        return self._by_env[env]

    def find(self, draft: EntryDraft) -> str | None:
        """Return the oldest active note of the draft's env with the draft's text, word for word."""
        return self._texts(draft.env or "").get(draft.text_for_embedding())

    def add(self, row: EntryRow) -> None:
        """Count a row this batch made (older than every later draft of the batch)."""
        if row.kind == "mistake":
            self._texts(row.env or "").setdefault(draft_of(row).text_for_embedding(), row.id)

    def widen(self, entry_id: str, draft: EntryDraft, author: str) -> EntryRow | None:
        """Make note ``entry_id`` a note of every category, as ``draft`` repeats it for another.

        The change is a new revision. Returns the row, or None when it needed no change.
        """
        row = self._session.get(EntryRow, entry_id)
        if row is None or row.category is None or row.category == draft.category:
            return None
        reason = (
            f"filed word for word for {draft.category or 'every category'} too: one note "
            f"for every category instead of a copy per category (was {row.category})"
        )
        row.category = None
        row.revision += 1
        row.updated_at = utcnow()
        self._session.flush()
        add_revision(self._session, row, author=author, reason=reason)
        return row


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
