"""The ChromaDB vector index over active entries (embedded, or a Chroma server by URL).

Embeddings are always passed in explicitly; collections are created without an embedding
function, so Chroma never loads (or downloads) a model of its own and its stored collection
configuration holds no model path. Chroma's columnar results are unpacked only in
:func:`_unpack`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlparse

import numpy as np

from memory.config import BankConfig
from skillrl_core.errors import BankError

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import GetResult, QueryResult

logger = logging.getLogger(__name__)

Partition = tuple[str, str, str]
"""(kind, env, category): entries are kept in one collection per partition, so that retrieval
queries need no metadata filter (filtered HNSW queries were 5-10x slower in Chroma)."""


def partition_of(metadata: dict[str, Any]) -> Partition:
    """Return the partition an entry's index metadata puts it in.

    General skills and notes by env only (an entry without an env applies to every one, and
    retrieval searches its env's partition and the env-agnostic one); task skills by env and
    category (retrieval filters by both).
    """
    kind = str(metadata["kind"])
    category = str(metadata.get("category") or "") if kind == "task" else ""
    return (kind, str(metadata.get("env") or ""), category)


@dataclass
class IndexRecord:
    """One vector in the index: an entry id, its metadata, and (when asked for) its vector."""

    id: str
    metadata: dict[str, Any] = field(default_factory=dict)
    similarity: float | None = None
    """Cosine similarity to the query (query results only)."""
    embedding: np.ndarray | None = None


def _unpack(result: GetResult | QueryResult, *, nested: bool) -> list[list[IndexRecord]]:
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


def _holds_an_index(folder: Path) -> bool:
    """Whether ``folder`` already holds an embedded Chroma index (a new bank's does not)."""
    return (folder / "chroma.sqlite3").is_file()


def _private_copy(source: Path) -> Path:
    """Copy an embedded index to a temporary folder, to be read without writing the original.

    Embedded Chroma cannot open a folder it may not write, not even to read it, and opening one
    rewrites some of its files.
    """
    target = Path(tempfile.mkdtemp(prefix="skillrl-index-")) / "chroma"
    if source.is_dir():
        # Plain copies: the source's read-only modes must not come along.
        shutil.copytree(
            source,
            target,
            ignore=shutil.ignore_patterns("skillrl.lock"),
            copy_function=shutil.copyfile,
        )
        for folder, _dirs, _files in os.walk(target):
            os.chmod(folder, 0o700)
    logger.info("reading a private copy of the index at %s in %s", source, target)
    return target


SELF_MATCH_DISTANCE = 1e-3
"""A stored vector's cosine distance to itself is 0 (to float rounding); a probe whose nearest
record is farther than this finds a partition whose vector files are missing or damaged."""


QUERY_HITS_PER_CALL = 8192
"""Most hits (query rows x n_results) asked of Chroma in one call (SQLite's variable limit)."""


class VectorIndex:
    """A Chroma collection in cosine space, holding one vector per active entry.

    An embedded index opened for writing reads a private copy of its folder until the first
    change (:meth:`_writable`): merely opening embedded Chroma rewrites its ``chroma.sqlite3``
    and segment files, so a command that is refused, or only reads, after opening the bank for
    writing would otherwise change the index's bytes though nothing in the bank changed.
    """

    def __init__(self, config: BankConfig, *, read_only: bool = False):
        self.config = config
        self.writes = 0
        """Index changes made through this object (the bank versions them across processes)."""
        self._lock_file: IO[bytes] | None = None
        self._private: Path | None = None
        self._writer_pending = False
        """Opened for writing but reading a private copy until the first change."""
        if not config.chroma_url and (read_only or _holds_an_index(config.chroma_path)):
            self._writer_pending = not read_only
            self._private = self._copy_under_lock()
        try:
            self._connect()
        except BaseException:
            self._remove_private_copy()
            raise

    def _copy_under_lock(self) -> Path:
        """Copy the embedded index while no writer is half-way through a change."""
        source = self.config.chroma_path
        if not (source / "skillrl.lock").is_file():  # never opened by a writer: nothing to wait for
            return _private_copy(source)
        import fcntl

        with open(source / "skillrl.lock", "rb") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_SH)
            try:
                return _private_copy(source)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _writable(self) -> None:
        """Before the first change of an index opened for writing: leave the private copy."""
        if not self._writer_pending:
            return
        self._client.close()
        self._release_lock_file()  # the copy's: the real folder's is taken from now on
        self._remove_private_copy()
        self._private = None
        self._writer_pending = False
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
        path = self._private or config.chroma_path
        if not config.chroma_url:
            path.mkdir(parents=True, exist_ok=True)
            self._lock_path = path / "skillrl.lock"
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
                    self._client = chromadb.PersistentClient(path=str(path), settings=settings)
                self._name = config.collection
                self._cache: dict[str, Collection] | None = None
                self._collections(refresh=True)
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

        if self._lock_file is None or self._lock_file.closed:
            self._lock_file = open(self._lock_path, "a+b")  # noqa: SIM115 - held until close()
        fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_UN)

    def reload(self) -> None:
        """See other processes' changes: re-read an embedded index, re-list server partitions.

        Embedded Chroma keeps the HNSW graph in memory per process, so another process's
        writes are invisible (and our next write would clobber theirs) until it is reloaded.
        """
        if self._writer_pending:  # a fresh copy holds what the other process wrote
            self._client.close()
            self._release_lock_file()
            self._remove_private_copy()
            self._private = self._copy_under_lock()
            self._connect()
            return
        if self.shared_by_processes_safely or self._private is not None:
            self._collections(refresh=True)  # nobody else writes a private copy
            return
        with self._exclusive():
            self._client.close()
        self._connect()

    def close(self) -> None:
        """Release the client (the embedded index's files and memory) and the lock file."""
        self._client.close()
        if self._lock_file is not None:
            self._lock_file.close()
        self._remove_private_copy()

    def unsearchable_partitions(self, sample: int = 2) -> list[str]:
        """Partitions whose stored vectors do not find themselves: their vector files are gone.

        Chroma answers a query on a partition whose segment files were deleted (once its log
        has been compacted into them) with other records, or fails; its records and metadata
        still read back, so comparing ids with SQL cannot see it. ``sample`` stored vectors per
        partition are queried; each must come back at distance 0.
        """
        damaged = []
        with self._exclusive():
            for name, collection in sorted(self._collections(refresh=True).items()):
                try:
                    stored = collection.get(limit=sample, include=["embeddings"])
                    if not stored["ids"]:
                        continue
                    found = collection.query(
                        query_embeddings=np.asarray(stored["embeddings"], dtype=np.float32),
                        n_results=1,
                        include=["distances"],
                    )
                    distances = [row[0] if row else 2.0 for row in found["distances"] or []]
                    if len(distances) != len(stored["ids"]) or max(distances) > SELF_MATCH_DISTANCE:
                        damaged.append(name)
                except Exception:  # chromadb raises assorted internal errors for missing files
                    damaged.append(name)
        return damaged

    def _release_lock_file(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def _remove_private_copy(self) -> None:
        if self._private is not None:
            shutil.rmtree(self._private.parent, ignore_errors=True)

    @property
    def max_batch(self) -> int:
        """The largest batch Chroma accepts in one call."""
        return int(self._client.get_max_batch_size())

    def _partition_name(self, key: Partition) -> str:
        digest = hashlib.sha1("\x1f".join(key[1:]).encode()).hexdigest()[:16]
        return f"{self._name}-{key[0]}-{digest}"

    def _collections(self, *, refresh: bool = False) -> dict[str, Collection]:
        """Every partition collection of this bank, by name (cached; refreshed on demand)."""
        if refresh or self._cache is None:
            prefix = f"{self._name}-"
            self._cache = {
                c.name: c for c in self._client.list_collections() if c.name.startswith(prefix)
            }
        return self._cache

    def _partition(self, key: Partition, *, create: bool) -> Collection | None:
        name = self._partition_name(key)
        # A miss is not re-listed here: partitions other processes create become visible on
        # ``reload`` (which the bank calls when the index version in SQL moves).
        found = self._collections(refresh=create).get(name)
        if found is None and create:
            found = self._client.get_or_create_collection(
                name,
                configuration={"hnsw": {"space": "cosine"}},
                metadata={"kind": key[0], "env": key[1], "category": key[2]},
                embedding_function=None,
            )
            self._collections()[name] = found
        return found

    def partitions(self, kind: str, env: str) -> list[Partition]:
        """Every partition of ``kind`` in ``env`` that holds a collection (as last listed)."""
        keys = []
        with self._exclusive():
            for collection in self._collections().values():
                meta = collection.metadata or {}
                if meta.get("kind") == kind and meta.get("env") == env:
                    keys.append((kind, env, str(meta.get("category") or "")))
        return sorted(keys)

    def count(self) -> int:
        """Return the number of vectors in the index."""
        with self._exclusive():
            return sum(int(c.count()) for c in self._collections(refresh=True).values())

    def upsert(
        self, ids: list[str], embeddings: np.ndarray, metadatas: list[dict[str, Any]]
    ) -> None:
        """Insert or replace vectors, each in its partition (chunked to Chroma's batch limit)."""
        self._writable()
        self.writes += 1
        groups: dict[Partition, list[int]] = {}
        for position, metadata in enumerate(metadatas):
            groups.setdefault(partition_of(metadata), []).append(position)
        step = self.max_batch
        with self._exclusive():
            # An entry whose kind/env/category changed must leave its old partition.
            self._delete(ids, keep={self._partition_name(k) for k in groups})
            for key, positions in groups.items():
                collection = self._partition(key, create=True)
                for start in range(0, len(positions), step):
                    chunk = positions[start : start + step]
                    collection.upsert(
                        ids=[ids[i] for i in chunk],
                        embeddings=np.asarray(embeddings[chunk], dtype=np.float32),
                        metadatas=[metadatas[i] for i in chunk],
                    )

    def _delete(self, ids: list[str], *, keep: frozenset[str] | set[str] = frozenset()) -> None:
        for name, collection in self._collections(refresh=True).items():
            if name not in keep:
                collection.delete(ids=ids)

    def delete(self, ids: list[str]) -> None:
        """Remove vectors by id (missing ids are ignored)."""
        if ids:
            self._writable()
            self.writes += 1
            with self._exclusive():
                self._delete(ids)

    def get(self, ids: list[str] | None = None, *, embeddings: bool = False) -> list[IndexRecord]:
        """Return records by id (all records when ``ids`` is None), with metadata."""
        include = ["metadatas", "embeddings"] if embeddings else ["metadatas"]
        if ids is not None and not ids:
            return []
        records: list[IndexRecord] = []
        with self._exclusive():
            for collection in self._collections(refresh=True).values():
                result = collection.get(ids=ids, include=include)
                records += _unpack(result, nested=False)[0]
        return records

    def vectors(self, ids: list[str], partition: Partition) -> dict[str, np.ndarray]:
        """Return the stored vectors of ``ids`` that are in one partition, by id."""
        if not ids:
            return {}
        with self._exclusive():
            collection = self._partition(partition, create=False)
            if collection is None:
                return {}
            result = collection.get(ids=ids, include=["embeddings"])
        return {
            r.id: r.embedding for r in _unpack(result, nested=False)[0] if r.embedding is not None
        }

    def query(
        self,
        embeddings: np.ndarray,
        n_results: int,
        partition: Partition,
        where: dict[str, Any] | None = None,
    ) -> list[list[IndexRecord]]:
        """Return the nearest records of one partition to each query vector, best first."""
        if n_results <= 0 or len(embeddings) == 0:
            return [[] for _ in range(len(embeddings))]
        with self._exclusive():
            collection = self._partition(partition, create=False)
            if collection is None:
                return [[] for _ in range(len(embeddings))]
            vectors = np.asarray(embeddings, dtype=np.float32)
            # Chroma reads every hit's metadata with one SQL statement, a variable per hit, and
            # SQLite refuses past its limit (400 queries x 128 hits failed): split the rows.
            step = max(1, QUERY_HITS_PER_CALL // n_results)
            out: list[list[IndexRecord]] = []
            for start in range(0, len(vectors), step):
                result = collection.query(
                    query_embeddings=vectors[start : start + step],
                    n_results=n_results,
                    where=where,
                    include=["metadatas", "distances"],
                )
                out += _unpack(result, nested=True)
        return out

    def clear(self) -> None:
        """Drop every vector (delete every partition collection)."""
        self._writable()
        self.writes += 1
        with self._exclusive():
            for name in self._collections(refresh=True):
                self._client.delete_collection(name)
            self._cache = {}
