"""The ChromaDB vector index over active entries (embedded, or a Chroma server by URL).

Embeddings are always passed in explicitly; the collection is created without an embedding
function, so Chroma never loads (or downloads) a model of its own and its stored collection
configuration holds no model path. Chroma's columnar results are unpacked only in
:func:`_unpack`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import numpy as np

from memory.config import BankConfig
from skillrl.errors import BankError

logger = logging.getLogger(__name__)


@dataclass
class IndexRecord:
    """One vector in the index: an entry id, its metadata, and (when asked for) its vector."""

    id: str
    metadata: dict[str, Any] = field(default_factory=dict)
    similarity: float | None = None
    """Cosine similarity to the query (query results only)."""
    embedding: np.ndarray | None = None


def _unpack(result: Any, *, nested: bool) -> list[list[IndexRecord]]:
    """Turn Chroma's columnar ``get``/``query`` result into records (one list per query)."""
    ids = result["ids"] if nested else [result["ids"]]
    columns: dict[str, list[Any]] = {}
    for name in ("metadatas", "distances", "embeddings"):
        value = result.get(name)
        if value is not None:
            columns[name] = value if nested else [value]
    out: list[list[IndexRecord]] = []
    for q, row_ids in enumerate(ids):
        rows = []
        for i, entry_id in enumerate(row_ids):
            metadata = columns["metadatas"][q][i] if "metadatas" in columns else None
            distance = columns["distances"][q][i] if "distances" in columns else None
            vector = columns["embeddings"][q][i] if "embeddings" in columns else None
            rows.append(
                IndexRecord(
                    id=entry_id,
                    metadata=dict(metadata or {}),
                    # Chroma's cosine space returns distance = 1 - cosine similarity.
                    similarity=None if distance is None else 1.0 - float(distance),
                    embedding=None if vector is None else np.asarray(vector, dtype=np.float32),
                )
            )
        out.append(rows)
    return out


class VectorIndex:
    """A Chroma collection in cosine space, holding one vector per active entry."""

    def __init__(self, config: BankConfig):
        self.config = config
        self.writes = 0
        """Index changes made through this object (the bank versions them across processes)."""
        self._connect()

    @property
    def shared_by_processes_safely(self) -> bool:
        """A Chroma server is; an embedded index holds a per-process copy in memory."""
        return self.config.chroma_url is not None

    def _connect(self) -> None:
        import chromadb
        from chromadb.config import Settings

        config = self.config
        settings = Settings(anonymized_telemetry=False)
        if not config.chroma_url:
            config.chroma_path.mkdir(parents=True, exist_ok=True)
            self._lock_path = config.chroma_path / "skillrl.lock"
        try:
            with self._exclusive():
                if config.chroma_url:
                    url = urlparse(config.chroma_url)
                    self._client = chromadb.HttpClient(
                        host=url.hostname or "localhost",
                        port=url.port or (443 if url.scheme == "https" else 8000),
                        ssl=url.scheme == "https",
                        settings=settings,
                    )
                else:
                    self._client = chromadb.PersistentClient(
                        path=str(config.chroma_path), settings=settings
                    )
                self._name = config.collection
                self._collection = self._open_collection()
        except Exception as e:  # chromadb raises many unrelated types for "cannot reach"
            where = config.chroma_url or config.chroma_path
            raise BankError(f"cannot open the Chroma index at {where}: {e}") from e

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold an exclusive file lock on an embedded index for the length of one call.

        Embedded Chroma is not safe for several processes at once (even a query may apply
        pending log records to the on-disk segments), so calls from different processes on one
        embedded index take turns. A Chroma server needs no lock.
        """
        if self.shared_by_processes_safely:
            yield
            return
        import fcntl

        with open(self._lock_path, "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def reload(self) -> None:
        """Drop this process's in-memory copy of an embedded index and read it from disk again.

        Embedded Chroma keeps the HNSW graph in memory per process, so another process's
        writes are invisible (and our next write would clobber theirs) until it is reloaded.
        """
        if self.shared_by_processes_safely:
            return
        with self._exclusive():
            self.close()
        self._connect()

    def close(self) -> None:
        """Release the client (the embedded index's files and memory)."""
        self._client.close()

    def _open_collection(self) -> Any:
        return self._client.get_or_create_collection(
            self._name,
            configuration={"hnsw": {"space": "cosine"}},
            embedding_function=None,
        )

    @property
    def max_batch(self) -> int:
        """The largest batch Chroma accepts in one call."""
        return int(self._client.get_max_batch_size())

    def count(self) -> int:
        """Number of vectors in the index."""
        with self._exclusive():
            return int(self._collection.count())

    def upsert(
        self, ids: list[str], embeddings: np.ndarray, metadatas: list[dict[str, Any]]
    ) -> None:
        """Insert or replace vectors (chunked to Chroma's batch limit)."""
        self.writes += 1
        step = self.max_batch
        with self._exclusive():
            for start in range(0, len(ids), step):
                self._collection.upsert(
                    ids=ids[start : start + step],
                    embeddings=np.asarray(embeddings[start : start + step], dtype=np.float32),
                    metadatas=metadatas[start : start + step],
                )

    def delete(self, ids: list[str]) -> None:
        """Remove vectors by id (missing ids are ignored)."""
        if ids:
            self.writes += 1
            with self._exclusive():
                self._collection.delete(ids=ids)

    def get(self, ids: list[str] | None = None, *, embeddings: bool = False) -> list[IndexRecord]:
        """Records by id (all records when ``ids`` is None), with metadata."""
        include = ["metadatas", "embeddings"] if embeddings else ["metadatas"]
        if ids is not None and not ids:
            return []
        with self._exclusive():
            result = self._collection.get(ids=ids, include=include)
        return _unpack(result, nested=False)[0]

    def query(
        self, embeddings: np.ndarray, n_results: int, where: dict[str, Any] | None = None
    ) -> list[list[IndexRecord]]:
        """Nearest records to each query vector (best first), restricted by ``where``."""
        if n_results <= 0 or len(embeddings) == 0:
            return [[] for _ in range(len(embeddings))]
        with self._exclusive():
            result = self._collection.query(
                query_embeddings=np.asarray(embeddings, dtype=np.float32),
                n_results=n_results,
                where=where,
                include=["metadatas", "distances"],
            )
        return _unpack(result, nested=True)

    def clear(self) -> None:
        """Drop every vector (delete and recreate the collection)."""
        self.writes += 1
        with self._exclusive():
            self._client.delete_collection(self._name)
            self._collection = self._open_collection()
