"""The :class:`SkillBank` facade: SQL is the source of truth, Chroma indexes active entries.

Every change runs in one SQL write transaction; the index is changed inside it, before the
commit, and each index change registers its undo. If anything fails (the index write, a later
statement or the commit), the SQL transaction rolls back and the undos run, so neither store is
left changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from memory import consistency, retrieval, snapshots, trajectories
from memory.config import BankConfig, RetrievalConfig
from memory.db import read_session, upgrade_schema, write_session
from memory.embedding import Embedder, shared_embedder
from memory.entries import (
    EDITABLE_FIELDS,
    content_of,
    content_of_draft,
    entry_from_row,
    index_metadata,
    normalise_draft,
    validate_draft,
)
from memory.index import VectorIndex
from memory.merging import place_drafts
from memory.models import EntryRow, ProvenanceRow, RevisionRow, utcnow
from memory.revisions import add_revision, history, revision_data
from memory.storage import open_engine
from memory.types import (
    AddResult,
    BankDiff,
    Entry,
    EntryDraft,
    RetrievalQuery,
    RetrievedSkills,
    Revision,
    SnapshotInfo,
)
from memory.versioning import bump_index_version, index_version
from skillrl_core.errors import BankError, InvalidEntryError, SkillNotFoundError
from skillrl_core.records import EpisodeRecord

logger = logging.getLogger(__name__)
Undo = Callable[[], None]
MIN_PREFIX = 6
"""Shortest id prefix :meth:`SkillBank.resolve_id` accepts (shorter ones too often collide)."""


class SkillBank:
    """Skills and counterfactual notes, their history, usage, and the trajectories behind them."""

    def __init__(
        self,
        config: BankConfig,
        engine: Engine,
        index: VectorIndex,
        embedder: Embedder | None,
        *,
        read_only: bool = False,
    ):
        self.config = config
        self.engine = engine
        self.index = index
        self.read_only = read_only
        """True when this process may not write the bank's files: reads work, changes raise."""
        self._embedder = embedder
        self._index_version: str | None = None

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
            bank = cls(config, engine, index, embedder, read_only=read_only)
            if verify:
                consistency.check_embedder(bank)
            if verify and config.on_mismatch != "ignore":
                consistency.check_on_open(bank, repair=config.on_mismatch == "repair")
        except BaseException:
            engine.dispose()
            raise
        return bank

    def require_writable(self) -> None:
        """Raise :class:`BankError` (one line) when this bank was opened read-only."""
        if self.read_only:
            raise BankError(
                f"the skill bank in {self.config.workspace} is read-only (no write permission); "
                "`list`, `show`, `search` and `export` still work, changes need a writable "
                "workspace"
            )

    @property
    def embedder_loaded(self) -> bool:
        """Whether the embedding model is already loaded (using it then costs no load time)."""
        return self._embedder is not None

    @property
    def embedder(self) -> Embedder:
        """The embedding model, loaded on first use (listing entries never needs it)."""
        if self._embedder is None:
            self._embedder = shared_embedder(self.config.embedder)
        return self._embedder

    def close(self) -> None:
        """Release database connections and the index client."""
        self.engine.dispose()
        self.index.close()

    def __enter__(self) -> SkillBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[tuple[Session, list[Undo]]]:
        """Open a write transaction; yields it with a list of index undos run if it fails."""
        self.require_writable()
        undo: list[Undo] = []
        try:
            with write_session(self.engine) as session:
                self._sync_index(session)
                writes = self.index.writes
                yield session, undo
                if self.index.writes != writes:
                    self._index_version = bump_index_version(session)
        except BaseException:
            for step in reversed(undo):
                try:
                    step()
                except Exception:  # keep undoing; the original error is what matters
                    logger.exception("could not undo an index change; run `skillrl skills reindex`")
            raise

    def _sync_index(self, session: Session) -> None:
        """Reload an embedded index that another process has changed since we last looked."""
        version = index_version(session)
        if self._index_version is not None and version != self._index_version:
            logger.debug("the index changed in another process; reloading it")
            self.index.reload()
        self._index_version = version

    def sync_index(self) -> None:
        """Make this process see index changes other processes have committed (reads call it)."""
        with read_session(self.engine) as session:
            self._sync_index(session)

    def index_upsert(self, rows: list[EntryRow], vectors: np.ndarray, undo: list[Undo]) -> None:
        """Put ``rows`` in the index, registering how to put back what was there before."""
        ids = [r.id for r in rows]
        before = self.index.get(ids, embeddings=True)
        absent = sorted(set(ids) - {r.id for r in before})

        def _undo() -> None:
            self.index.delete(absent)
            if before:
                self.index.upsert(
                    [r.id for r in before],
                    np.stack([r.embedding for r in before]),
                    [r.metadata for r in before],
                )

        undo.append(_undo)
        self.index.upsert(ids, vectors, [index_metadata(r) for r in rows])

    def index_delete(self, ids: list[str], undo: list[Undo]) -> None:
        """Remove ``ids`` from the index, registering how to put them back."""
        before = self.index.get(ids, embeddings=True)
        if not before:
            return
        undo.append(
            lambda: self.index.upsert(
                [r.id for r in before],
                np.stack([r.embedding for r in before]),
                [r.metadata for r in before],
            )
        )
        self.index.delete([r.id for r in before])

    # ----------------------------------------------------------------- reading entries

    def get(self, entry_id: str) -> Entry:
        """Return the entry with this id (any status); raise SkillNotFoundError if none."""
        with read_session(self.engine) as session:
            return self._entry(session, self._row(session, entry_id))

    def resolve_id(self, text: str) -> str:
        """Return the full id of the entry whose id is ``text`` or starts with it (6+ chars)."""
        with read_session(self.engine) as session:
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
        if not ids:
            return {}
        with read_session(self.engine) as session:
            rows = session.scalars(select(EntryRow).where(EntryRow.id.in_(ids))).all()
            prov = session.scalars(
                select(ProvenanceRow)
                .where(ProvenanceRow.entry_id.in_(ids))
                .order_by(ProvenanceRow.id)
            ).all()
        by_entry: dict[str, list[ProvenanceRow]] = {}
        for p in prov:
            by_entry.setdefault(p.entry_id, []).append(p)
        return {r.id: entry_from_row(r, by_entry.get(r.id, [])) for r in rows}

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
        with read_session(self.engine) as session:
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
        with read_session(self.engine) as session:
            return int(session.scalar(query) or 0)

    # ----------------------------------------------------------------- writing entries

    def add(self, draft: EntryDraft, *, author: str = "person") -> AddResult:
        """Add a draft, or merge it into an active near-duplicate of the same kind/category."""
        return self.add_many([draft], author=author)[0]

    def add_many(self, drafts: list[EntryDraft], *, author: str = "person") -> list[AddResult]:
        """Add several drafts in one transaction (all or none), merging near-duplicates."""
        drafts = [normalise_draft(d) for d in drafts]
        for position, draft in enumerate(drafts):
            try:
                validate_draft(draft)
            except InvalidEntryError as e:
                where = f"draft {position}: " if len(drafts) > 1 else ""
                raise InvalidEntryError(f"{where}{e}") from e
        if not drafts:
            return []
        self.require_writable()  # before loading the model: a read-only bank fails at once
        vectors = self.embedder.embed([d.text_for_embedding() for d in drafts])
        with self.transaction() as (session, undo):
            results, new_rows, new_vectors = place_drafts(self, session, drafts, vectors, author)
            session.flush()
            if new_rows:
                self.index_upsert(new_rows, np.stack(new_vectors), undo)
            out = [
                AddResult(self._entry(session, session.get(EntryRow, entry_id)), merged, sim)
                for entry_id, merged, sim in results
            ]
        return out

    def edit(self, entry_id: str, *, author: str, reason: str = "", **changes: Any) -> Entry:
        """Change content fields of an entry; the previous version stays in its history."""
        unknown = sorted(set(changes) - EDITABLE_FIELDS)
        if unknown:
            raise InvalidEntryError(
                f"cannot edit {', '.join(unknown)}; "
                f"editable fields: {', '.join(sorted(EDITABLE_FIELDS))}"
            )
        return self._change(entry_id, changes, author=author, reason=reason)

    def retire(self, entry_id: str, *, author: str, reason: str = "") -> Entry:
        """Take an entry out of retrieval (kept, with its history; :meth:`restore` undoes it)."""
        return self._change(entry_id, {"status": "retired"}, author=author, reason=reason)

    def restore(self, entry_id: str, *, author: str, reason: str = "") -> Entry:
        """Put a retired entry back into retrieval."""
        return self._change(entry_id, {"status": "active"}, author=author, reason=reason)

    def revert(self, entry_id: str, revision: int, *, author: str, reason: str = "") -> Entry:
        """Make a past revision's content (and status) current again, as a new revision."""
        with read_session(self.engine) as session:
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
        with read_session(self.engine) as session:
            after = {**content_of(self._row(session, entry_id)), **changes}
        if after.pop("status") != "active":
            return "", np.zeros((0, 0), dtype=np.float32)
        try:
            draft = normalise_draft(EntryDraft(**after))
            validate_draft(draft)
        except (TypeError, InvalidEntryError):
            return "", np.zeros((0, 0), dtype=np.float32)
        text = draft.text_for_embedding()
        return text, self.embedder.embed([text])

    def _change(self, entry_id: str, changes: dict[str, Any], *, author: str, reason: str) -> Entry:
        planned_text, planned_vector = self._planned_vector(entry_id, changes)
        with self.transaction() as (session, undo):
            row = self._row(session, entry_id)
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
                self.index_delete([row.id], undo)
            else:
                text = draft.text_for_embedding()
                # Another writer may have changed the entry since it was planned: embed again.
                vector = planned_vector if text == planned_text else self.embedder.embed([text])
                self.index_upsert([row], vector, undo)
            return self._entry(session, row)

    def remove(self, entry_id: str) -> None:
        """Delete an entry, its history and provenance for good (prefer :meth:`retire`)."""
        with self.transaction() as (session, undo):
            row = self._row(session, entry_id)
            for table in (RevisionRow, ProvenanceRow):
                session.query(table).filter(table.entry_id == entry_id).delete()
            session.delete(row)
            session.flush()
            self.index_delete([entry_id], undo)

    def history(self, entry_id: str) -> list[Revision]:
        """Every revision of an entry, oldest first."""
        with read_session(self.engine) as session:
            self._row(session, entry_id)
            return history(session, entry_id)

    # ----------------------------------------------------------------- retrieval, episodes

    def retrieve(
        self,
        queries: list[RetrievalQuery],
        config: RetrievalConfig | None = None,
        *,
        record: bool = True,
    ) -> list[RetrievedSkills]:
        """Return the entries each query should see, per kind, best first (one embedding pass)."""
        return retrieval.retrieve(self, queries, config or RetrievalConfig(), record=record)

    def save_episodes(self, episodes: list[EpisodeRecord]) -> None:
        """Store finished episodes (idempotent by ``episode_id``) and update entry stats."""
        trajectories.save_episodes(self, episodes)

    def episodes(self, **filters: Any) -> list[EpisodeRecord]:
        """Return stored episodes matching env/split/success/distilled/group_id, oldest first."""
        return trajectories.episodes(self, **filters)

    def mark_distilled(self, episode_ids: list[str], *, distiller: str) -> None:
        """Record that these episodes have been distilled (so they are not distilled again)."""
        trajectories.mark_distilled(self, episode_ids, distiller=distiller)

    def episode_totals(
        self, *, env: str | None = None, category: str | None = None, skills_only: bool = False
    ) -> tuple[int, int]:
        """``(episodes, successes)`` stored for ``env``/``category`` (all when None).

        ``skills_only``: only episodes that retrieved skills (the baseline of entry utility).
        """
        return trajectories.episode_totals(
            self, env=env, category=category, skills_only=skills_only
        )

    # ----------------------------------------------------------------- snapshots, upkeep

    def snapshot(self, name: str) -> SnapshotInfo:
        """Save every entry's content and status under ``name``."""
        return snapshots.take(self, name)

    def snapshots(self) -> list[SnapshotInfo]:
        """Return the saved snapshots, oldest first."""
        return snapshots.listing(self)

    def diff(self, a: str, b: str | None = None) -> BankDiff:
        """How snapshot ``b`` (the current bank when None) differs from snapshot ``a``."""
        return snapshots.diff(self, a, b)

    def check(self) -> consistency.ConsistencyReport:
        """Compare SQL's active entries with the index."""
        return consistency.check(self)

    def reindex(self) -> int:
        """Rebuild the index from SQL; returns the number of entries indexed."""
        return consistency.reindex(self)
