"""The :class:`SkillBank`: skills and notes, SQL the source of truth, a Chroma index beside it.

The bank's own methods are what a person or the runtime calls on entries (add, get, list,
retrieve, edit, retire, restore, revert, remove, history). Episodes live in
``bank.trajectories`` (:class:`~memory.trajectories.TrajectoryStore`) and named snapshots in
``bank.snapshots`` (:class:`~memory.snapshots.SnapshotStore`); all three share one
:class:`~memory.store.BankStore` (engine, index, embedder, and the write transaction that keeps
SQL and the index changing together).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.exc import DatabaseError
from sqlalchemy.orm import Session

import memory.consistency as consistency
from memory.bank_files import open_engine
from memory.config import BankConfig, RetrievalConfig
from memory.db import damaged_bank, read_session, upgrade_schema
from memory.embedding import Embedder
from memory.entries import (
    EDITABLE_FIELDS,
    content_of,
    content_of_draft,
    entry_from_row,
    normalise_draft,
    read_entries,
    validate_draft,
)
from memory.index import VectorIndex
from memory.merging import Placement, place_drafts, plan_placements
from memory.models import EntryRow, ProvenanceRow, RevisionRow, utcnow
from memory.retrieval import record_events, retrieve
from memory.revisions import add_revision, history, revision_data
from memory.snapshots import SnapshotStore
from memory.store import BankStore
from memory.trajectories import TrajectoryStore
from memory.types import (
    AddResult,
    Entry,
    EntryDraft,
    RetrievalEvent,
    RetrievalQuery,
    RetrievedSkills,
    Revision,
)
from skillrl_core.errors import InvalidEntryError, SkillNotFoundError, StaleRevisionError

logger = logging.getLogger(__name__)

MIN_PREFIX = 6
"""Shortest id prefix :meth:`SkillBank.resolve_id` accepts (shorter ones too often collide)."""


class SkillBank:
    """Skills and counterfactual notes, their history and usage; episodes and snapshots beside."""

    def __init__(self, store: BankStore):
        self.store = store
        """The shared engine, index, embedder and write transaction (for the bank's own modules)."""
        self.config: BankConfig = store.config
        self.trajectories = TrajectoryStore(store)
        """Finished episodes (:class:`~memory.trajectories.TrajectoryStore`)."""
        self.snapshots = SnapshotStore(store)
        """Named copies of the entries (:class:`~memory.snapshots.SnapshotStore`)."""

    @classmethod
    def open(
        cls,
        config: BankConfig | None = None,
        *,
        embedder: Embedder | None = None,
        verify: bool = True,
    ) -> SkillBank:
        """Open (creating or migrating if needed) the bank that ``config`` describes.

        ``embedder`` is an already loaded model for ``config.embedder`` (tests and long-running
        processes share one). With ``verify`` (the default) the embedder recorded in the bank and
        the SQL/index agreement are checked as ``config.on_mismatch`` says; ``reindex`` opens
        without it.
        """
        config = config or BankConfig()
        engine, read_only = open_engine(config)
        try:
            upgrade_schema(engine, read_only=read_only)
            index = VectorIndex(config, read_only=read_only)
            store = BankStore(config, engine, index, embedder, read_only=read_only)
            if verify:
                consistency.check_embedder(store)
            if verify and config.on_mismatch != "ignore":
                consistency.check_on_open(store, repair=config.on_mismatch == "repair")
        except DatabaseError as e:  # a damaged file the header check could not see
            engine.dispose()
            raise damaged_bank(engine, e) from e
        except BaseException:
            engine.dispose()
            raise
        return cls(store)

    @property
    def read_only(self) -> bool:
        """True when this process may not write the bank's files: reads work, changes raise."""
        return self.store.read_only

    def require_writable(self) -> None:
        """Raise :class:`BankError` (one line) when this bank was opened read-only."""
        self.store.require_writable()

    def close(self) -> None:
        """Release database connections and the index client."""
        self.store.close()

    def __enter__(self) -> SkillBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- reading entries

    def get(self, entry_id: str) -> Entry:
        """Return the entry with this id (any status); raise SkillNotFoundError if none."""
        with read_session(self.store.engine) as session:
            return self._entry(session, self._row(session, entry_id))

    def resolve_id(self, text: str) -> str:
        """Return the full id of the entry whose id is ``text`` or starts with it (6+ chars)."""
        with read_session(self.store.engine) as session:
            if session.get(EntryRow, text) is not None:
                return text
            matches = []
            if len(text) >= MIN_PREFIX and text.isalnum():
                matches = list(
                    session.scalars(
                        select(EntryRow.id).where(EntryRow.id.startswith(text)).limit(2)
                    )
                )
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise SkillNotFoundError(f"id prefix {text!r} matches several entries; give more of it")
        if len(text) < MIN_PREFIX:
            raise SkillNotFoundError(
                f"{text!r} is too short to pick an entry: give its full id or at least "
                f"{MIN_PREFIX} characters of it (see `skillrl skills list`)"
            )
        raise SkillNotFoundError(f"no skill-bank entry has id {text!r} (see `skillrl skills list`)")

    def _row(self, session: Session, entry_id: str) -> EntryRow:
        row = session.get(EntryRow, entry_id)
        if row is None:
            raise SkillNotFoundError(f"no skill-bank entry has id {entry_id!r}")
        return row

    @staticmethod
    def _entry(session: Session, row: EntryRow) -> Entry:
        prov = session.scalars(
            select(ProvenanceRow).where(ProvenanceRow.entry_id == row.id).order_by(ProvenanceRow.id)
        ).all()
        return entry_from_row(row, list(prov))

    def entries(self, ids: list[str]) -> dict[str, Entry]:
        """Entries by id (ids that do not exist are left out), provenance included."""
        return read_entries(self.store.engine, ids)

    def list(
        self,
        *,
        kind: str | None = None,
        env: str | None = None,
        category: str | None = None,
        status: str | None = "active",
    ) -> list[Entry]:
        """Entries matching every given filter, oldest first (``status=None``: any status)."""
        query = select(EntryRow.id)
        for column, value in (
            (EntryRow.kind, kind),
            (EntryRow.env, env),
            (EntryRow.category, category),
            (EntryRow.status, status),
        ):
            if value is not None:
                query = query.where(column == value)
        with read_session(self.store.engine) as session:
            ids = list(session.scalars(query.order_by(EntryRow.created_at, EntryRow.id)))
        found = self.entries(ids)
        return [found[i] for i in ids if i in found]

    def count(self, *, kind: str | None = None, status: str | None = "active") -> int:
        """Count entries of ``kind`` (any kind if None) with ``status`` (any if None)."""
        query = select(func.count()).select_from(EntryRow)
        if kind is not None:
            query = query.where(EntryRow.kind == kind)
        if status is not None:
            query = query.where(EntryRow.status == status)
        with read_session(self.store.engine) as session:
            return int(session.scalar(query) or 0)

    # ----------------------------------------------------------------- writing entries

    def add(self, draft: EntryDraft, *, author: str = "person") -> AddResult:
        """Add a draft, or merge it into an active near-duplicate of the same kind/category."""
        return self.add_many([draft], author=author)[0]

    def add_many(self, drafts: list[EntryDraft], *, author: str = "person") -> list[AddResult]:
        """Add several drafts in one transaction (all or none), merging near-duplicates."""
        drafts = _valid_drafts(drafts)
        if not drafts:
            return []
        self.store.require_writable()  # before loading the model: a read-only bank fails at once
        vectors = self.store.embedder.embed([d.text_for_embedding() for d in drafts])
        with self.store.transaction() as (session, undo):
            placement = place_drafts(self.store, session, drafts, vectors, author)
            session.flush()
            if placement.index_rows:
                self.store.index_upsert(
                    placement.index_rows, np.stack(placement.index_vectors), undo
                )
            out = [
                AddResult(self._entry(session, session.get(EntryRow, entry_id)), merged, sim)
                for entry_id, merged, sim in placement.results
            ]
        return out

    def plan_many(self, drafts: list[EntryDraft]) -> list[Placement]:
        """Say where :meth:`add_many` would put each draft (merged or new), writing nothing.

        Works on a read-only bank; the embedder loads to compare the drafts.
        """
        drafts = _valid_drafts(drafts)
        if not drafts:
            return []
        vectors = self.store.embedder.embed([d.text_for_embedding() for d in drafts])
        with read_session(self.store.engine) as session:
            return plan_placements(self.store, session, drafts, vectors)

    def edit(
        self,
        entry_id: str,
        *,
        author: str,
        reason: str = "",
        expected_revision: int | None = None,
        **changes: Any,
    ) -> Entry:
        """Change content fields of an entry; the previous version stays in its history.

        With ``expected_revision``, the edit is made only if the entry is still at that revision
        (checked in the write transaction): otherwise :class:`StaleRevisionError`, nothing saved.
        """
        unknown = sorted(set(changes) - EDITABLE_FIELDS)
        if unknown:
            raise InvalidEntryError(
                f"cannot edit {', '.join(unknown)}; "
                f"editable fields: {', '.join(sorted(EDITABLE_FIELDS))}"
            )
        return self._change(
            entry_id, changes, author=author, reason=reason, expected_revision=expected_revision
        )

    def retire(self, entry_id: str, *, author: str, reason: str = "") -> Entry:
        """Take an entry out of retrieval (kept, with its history; :meth:`restore` undoes it)."""
        return self._change(entry_id, {"status": "retired"}, author=author, reason=reason)

    def restore(self, entry_id: str, *, author: str, reason: str = "") -> Entry:
        """Put a retired entry back into retrieval."""
        return self._change(entry_id, {"status": "active"}, author=author, reason=reason)

    def revert(self, entry_id: str, revision: int, *, author: str, reason: str = "") -> Entry:
        """Make a past revision's content (and status) current again, as a new revision."""
        with read_session(self.store.engine) as session:
            self._row(session, entry_id)
            data = revision_data(session, entry_id, revision)
        return self._change(
            entry_id, data, author=author, reason=reason or f"revert to revision {revision}"
        )

    def _planned_vector(self, entry_id: str, changes: dict[str, Any]) -> tuple[str, np.ndarray]:
        """Embed what the entry will read after ``changes``, before the write lock is taken.

        Loading the model can take seconds; inside the transaction every other writer would
        wait for it (an edit once held the lock 7.8 s of its 11 s). Returns ``("", empty)``
        when nothing needs embedding (retired, or invalid: the transaction reports that).
        """
        self.require_writable()
        with read_session(self.store.engine) as session:
            after = {**content_of(self._row(session, entry_id)), **changes}
        if after.pop("status") != "active":
            return "", np.zeros((0, 0), dtype=np.float32)
        try:
            draft = normalise_draft(EntryDraft(**after))
            validate_draft(draft)
        except (TypeError, InvalidEntryError):
            return "", np.zeros((0, 0), dtype=np.float32)
        text = draft.text_for_embedding()
        return text, self.store.embedder.embed([text])

    def _change(
        self,
        entry_id: str,
        changes: dict[str, Any],
        *,
        author: str,
        reason: str,
        expected_revision: int | None = None,
    ) -> Entry:
        planned_text, planned_vector = self._planned_vector(entry_id, changes)
        with self.store.transaction() as (session, undo):
            row = self._row(session, entry_id)
            if expected_revision is not None and row.revision != expected_revision:
                raise StaleRevisionError(
                    f"entry {entry_id} is at revision {row.revision}, not {expected_revision} "
                    "as the edit was made from; nothing was saved: reload it and edit again",
                    expected=expected_revision,
                    current=row.revision,
                )
            before = content_of(row)
            after = {**before, **changes}
            status = after.pop("status")
            draft = normalise_draft(EntryDraft(**after))
            validate_draft(draft)
            if status not in ("active", "retired"):
                raise InvalidEntryError(f"status ({status!r}) must be 'active' or 'retired'")
            new = {**content_of_draft(draft), "status": status}
            if new == before:
                return self._entry(session, row)
            for name, value in new.items():
                setattr(row, name, value)
            row.revision += 1
            row.updated_at = utcnow()
            session.flush()
            add_revision(session, row, author=author, reason=reason)
            if status == "retired":
                self.store.index_delete([row.id], undo)
            else:
                text = draft.text_for_embedding()
                # Another writer may have changed the entry since it was planned: embed again.
                vector = (
                    planned_vector if text == planned_text else self.store.embedder.embed([text])
                )
                self.store.index_upsert([row], vector, undo)
            return self._entry(session, row)

    def remove(self, entry_id: str) -> None:
        """Delete an entry, its history and provenance for good (prefer :meth:`retire`)."""
        with self.store.transaction() as (session, undo):
            row = self._row(session, entry_id)
            for table in (RevisionRow, ProvenanceRow):
                session.query(table).filter(table.entry_id == entry_id).delete()
            session.delete(row)
            session.flush()
            self.store.index_delete([entry_id], undo)

    def history(self, entry_id: str) -> list[Revision]:
        """Every revision of an entry, oldest first."""
        with read_session(self.store.engine) as session:
            self._row(session, entry_id)
            return history(session, entry_id)

    # ----------------------------------------------------------------- retrieval, upkeep

    def retrieve(
        self,
        queries: list[RetrievalQuery],
        config: RetrievalConfig | None = None,
        *,
        record: bool = True,
    ) -> list[RetrievedSkills]:
        """Return the entries each query should see, per kind, best first (one embedding pass)."""
        return retrieve(self.store, queries, config or RetrievalConfig(), record=record)

    def record(self, events: list[RetrievalEvent]) -> int:
        """Record retrievals made with ``record=False`` (``memory.types.retrieval_events``).

        One transaction writes the events and bumps ``times_retrieved``, as a recorded
        :meth:`retrieve` does. Events of entries that no longer exist are skipped with a warning
        (a person may have edited the bank between a retrieval and its recording). Returns how
        many were written.
        """
        known = self.entries(sorted({e.entry_id for e in events}))
        kept = [e for e in events if e.entry_id in known]
        for gone in sorted({e.entry_id for e in events} - set(known)):
            logger.warning("retrieved entry %s no longer exists; not counted", gone)
        record_events(self.store, kept)
        return len(kept)

    def check(self) -> consistency.ConsistencyReport:
        """Compare SQL's active entries with the index."""
        return consistency.check(self.store)

    def reindex(self) -> int:
        """Rebuild the index from SQL; returns the number of entries indexed."""
        return consistency.reindex(self.store)


def _valid_drafts(drafts: list[EntryDraft]) -> list[EntryDraft]:
    """Return the drafts normalised; the first invalid one raises, naming its position."""
    drafts = [normalise_draft(d) for d in drafts]
    for position, draft in enumerate(drafts):
        try:
            validate_draft(draft)
        except InvalidEntryError as e:
            where = f"draft {position}: " if len(drafts) > 1 else ""
            raise InvalidEntryError(f"{where}{e}") from e
    return drafts
