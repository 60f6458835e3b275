"""The plumbing the skill bank and its stores share: SQL engine, vector index, embedder, write lock.

:class:`~memory.bank.SkillBank` (entries), :class:`~memory.trajectories.TrajectoryStore` and
:class:`~memory.snapshots.SnapshotStore` all hold the same :class:`BankStore`, so a change to any
of them runs in the one write transaction described here: the index is changed inside it, before
the commit, and each index change registers its undo. If anything fails (the index write, a later
statement or the commit), the SQL transaction rolls back and the undos run, so neither store is
left changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from memory.config import BankConfig
from memory.db import read_session, write_session
from memory.embedding import Embedder, shared_embedder
from memory.entries import index_metadata
from memory.index import VectorIndex
from memory.models import EntryRow
from memory.versioning import bump_index_version, index_version
from skillrl_core.errors import BankError

logger = logging.getLogger(__name__)
Undo = Callable[[], None]


class BankStore:
    """One bank's SQL engine, vector index and embedder, and the write transaction over both."""

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
        self.request_vectors: dict[str, np.ndarray] = {}
        """Instructions embedded alone (what cases are retrieved by), kept for the episode's
        later turns: an episode asks with the same instruction every turn
        (``memory.retrieval.request_embeddings``)."""

    def require_writable(self) -> None:
        """Raise :class:`BankError` (one line) when the bank was opened read-only."""
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
