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


@dataclass(frozen=True)
class Placement:
    """Where one draft of a batch goes: merged into an entry or an earlier draft, or new."""

    entry_id: str | None = None
    """The stored entry it merges into (None: it does not merge into a stored entry)."""
    draft: int | None = None
    """Position of the earlier, new draft of the same batch it merges into."""
    similarity: float | None = None
    """Cosine similarity to what it merges into (None when it is new)."""
    widens: bool = False
    """It repeats, word for word, a note of another category: that note becomes a note of every
    category."""

    @property
    def merged(self) -> bool:
        """Whether the draft merges instead of becoming a new entry."""
        return self.entry_id is not None or self.draft is not None


@dataclass
class PlacedBatch:
    """Where a batch of drafts went, and the rows whose index records must be (re)written."""

    results: list[tuple[str, bool, float | None]] = field(default_factory=list)
    """Per draft: the entry it made or merged into, whether it merged, the merge similarity."""
    index_rows: list[EntryRow] = field(default_factory=list)
    """New entries, and stored notes that became notes of every category."""
    index_vectors: list[np.ndarray] = field(default_factory=list)
    """The vector of each of ``index_rows``."""


Target = str | int
"""A stored entry's id, or the position of an earlier new draft of the same batch."""


def plan_placements(
    store: BankStore, session: Session, drafts: list[EntryDraft], vectors: np.ndarray
) -> list[Placement]:
    """Decide where each draft goes, writing nothing (``skills import --dry-run`` shows this).

    :func:`place_drafts` writes exactly these decisions. A note widened earlier in the batch
    leaves its category's scope for the env's every-category scope, for the drafts after it.
    """
    placements: list[Placement] = []
    stored: dict[tuple[str, str, str, str], list[tuple[Target, np.ndarray]]] = {}
    new: list[int] = []
    copies = _NoteCopies(session)
    widened: dict[Target, tuple[tuple[str, str, str, str], np.ndarray]] = {}
    for position, (draft, vector) in enumerate(zip(drafts, vectors, strict=False)):
        key = _scope_of(draft)
        if key not in stored:  # merges change no vector: one read per scope per batch
            stored[key] = list(_stored_candidates(store, session, draft))
        # Drafts earlier in this batch are not in the index yet: they are candidates too, after
        # the stored entries (so that a tie still goes to the oldest).
        earlier: list[tuple[Target, np.ndarray]] = [
            (j, vectors[j]) for j in new if _scope_of(drafts[j]) == key
        ]
        candidates = [c for c in stored[key] + earlier if c[0] not in widened]
        candidates += [(t, v) for t, (scope, v) in widened.items() if scope == key]
        threshold = CASE_MERGE_THRESHOLD if draft.kind == "case" else store.config.merge_threshold
        target, similarity = _merge_target(vector, candidates, threshold)
        widens = False
        if target is None and draft.kind == "mistake":
            found = copies.find(draft)
            if found is not None:
                target, category = found
                similarity = 1.0  # the same text
                widens = category is not None and category != draft.category
                if widens:
                    copies.widen(target)
                    widened[target] = (_scope("mistake", draft.env, None), vector)
        if target is None:
            new.append(position)
            copies.add(position, draft)
            placements.append(Placement())
        elif isinstance(target, int):
            placements.append(Placement(draft=target, similarity=similarity, widens=widens))
        else:
            placements.append(Placement(entry_id=target, similarity=similarity, widens=widens))
    return placements


def place_drafts(
    store: BankStore, session: Session, drafts: list[EntryDraft], vectors: np.ndarray, author: str
) -> PlacedBatch:
    """Merge each draft into its best match above the threshold, or make a new row."""
    placed = PlacedBatch()
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
            if placement.widens:
                row = _widen(session, target, draft, author)
                if row is not None and row not in new_rows:  # this batch's rows are indexed below
                    partition = partition_of({"kind": "mistake", "env": row.env})
                    placed.index_rows.append(row)
                    placed.index_vectors.append(
                        store.index.vectors([row.id], partition).get(row.id, vector)
                    )
            session.execute(
                update(EntryRow)
                .where(EntryRow.id == target)
                .values(support_count=EntryRow.support_count + 1, updated_at=utcnow())
            )
            session.add(_provenance(target, draft, author, placement.similarity))
            placed.results.append((target, True, placement.similarity))
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
        placed.results.append((row.id, False, None))
    placed.index_rows[:0] = new_rows
    placed.index_vectors[:0] = new_vectors
    return placed


class _NoteCopies:
    """Active notes (and this batch's new ones) by env and embedded text, read once per env."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._by_env: dict[str, dict[str, tuple[Target, str | None]]] = {}
        """env -> note text -> (the oldest note with that text, its category)."""

    def _texts(self, env: str) -> dict[str, tuple[Target, str | None]]:
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
            texts: dict[str, tuple[Target, str | None]] = {}
            for row in rows:
                texts.setdefault(draft_of(row).text_for_embedding(), (row.id, row.category))
            self._by_env[env] = texts
        return self._by_env[env]

    def find(self, draft: EntryDraft) -> tuple[Target, str | None] | None:
        """Return the oldest note of the draft's env with the draft's text, and its category."""
        return self._texts(draft.env or "").get(draft.text_for_embedding())

    def add(self, position: int, draft: EntryDraft) -> None:
        """Count a new draft of this batch (older than every later draft of the batch)."""
        if draft.kind == "mistake":
            texts = self._texts(draft.env or "")
            texts.setdefault(draft.text_for_embedding(), (position, draft.category))

    def widen(self, target: Target) -> None:
        """Remember that ``target`` is now a note of every category."""
        for texts in self._by_env.values():
            for text, (found, _) in list(texts.items()):
                if found == target:
                    texts[text] = (target, None)


def _widen(session: Session, entry_id: str, draft: EntryDraft, author: str) -> EntryRow | None:
    """Make note ``entry_id`` a note of every category, as ``draft`` repeats it for another.

    The change is a new revision. Returns the row, or None when it needed no change.
    """
    row = session.get(EntryRow, entry_id)
    if row is None or row.category is None or row.category == draft.category:
        return None
    reason = (
        f"filed word for word for {draft.category or 'every category'} too: one note "
        f"for every category instead of a copy per category (was {row.category})"
    )
    row.category = None
    row.revision += 1
    row.updated_at = utcnow()
    session.flush()
    add_revision(session, row, author=author, reason=reason)
    return row


CASE_MERGE_THRESHOLD = 0.995
"""Cases merge only into a case of the same request naming the same solution (another training
goal of the same product, asking for other options): two products asked for in similar words,
or bought for one request, are two cases, since what a case carries is which product it was."""


def _merge_target(
    vector: np.ndarray, candidates: list[tuple[str | int, np.ndarray]], threshold: float
) -> tuple[str | int | None, float | None]:
    """Pick the most similar candidate at or above ``threshold``; the first one wins a tie."""
    best_id: str | int | None = None
    best: float | None = None
    for entry_id, other in candidates:
        similarity = float(np.dot(other, vector))
        if similarity >= threshold and (best is None or similarity > best):
            best_id, best = entry_id, similarity
    return best_id, best


def _scope(
    kind: str, env: str | None, category: str | None, solution: str = ""
) -> tuple[str, str, str, str]:
    """Return what entries that may merge share.

    The kind, plus env and category except for general, and for a case what it names (its
    title: cases of one request naming two products stay two, so that retrieval can serve the
    one that comes in what a later request wants).
    """
    if kind == "general":
        return ("general", "", "", "")
    return (kind, env or "", category or "", solution if kind == "case" else "")


def _scope_of(draft: EntryDraft) -> tuple[str, str, str, str]:
    return _scope(draft.kind, draft.env, draft.category, draft.title.strip())


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
    if draft.kind == "case":
        query = query.where(EntryRow.title == draft.title.strip())
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
