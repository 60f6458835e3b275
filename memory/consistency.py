"""Keeping SQL (the source of truth) and the vector index in agreement.

On open the active entries in SQL are compared with the index records (ids and revisions); a
mismatch is repaired from SQL (with a warning) or raised, as the bank's ``on_mismatch`` says.
``reindex`` rebuilds the whole index from SQL. Checks run under the bank's write lock, so an
other process's half-done change is never mistaken for a disagreement.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from memory.db import read_session
from memory.entries import draft_of, index_metadata
from memory.models import EntryRow, MetaRow
from skillrl_core.errors import BankInconsistentError

if TYPE_CHECKING:
    from memory.store import BankStore

logger = logging.getLogger(__name__)
EMBEDDER_KEY = "embedder"
REINDEX_BATCH = 512


@dataclass
class ConsistencyReport:
    """How the index differs from SQL's active entries."""

    sql_active: int
    index_count: int
    missing: list[str] = field(default_factory=list)
    """Active in SQL, absent from the index."""
    extra: list[str] = field(default_factory=list)
    """In the index, but not an active entry in SQL."""
    stale: list[str] = field(default_factory=list)
    """In both, but the index holds an older (or newer) revision."""

    @property
    def ok(self) -> bool:
        """True when the two stores agree."""
        return not (self.missing or self.extra or self.stale)

    def summary(self) -> str:
        """One line for people."""
        return (
            f"SQL has {self.sql_active} active entries, the index {self.index_count}: "
            f"{len(self.missing)} missing, {len(self.extra)} extra, {len(self.stale)} stale"
        )


def _compare(store: BankStore, session: Session) -> ConsistencyReport:
    rows = session.execute(
        select(EntryRow.id, EntryRow.revision).where(EntryRow.status == "active")
    ).all()
    active = {entry_id: revision for entry_id, revision in rows}
    indexed = {r.id: r.metadata.get("revision") for r in store.index.get()}
    return ConsistencyReport(
        sql_active=len(active),
        index_count=len(indexed),
        missing=sorted(set(active) - set(indexed)),
        extra=sorted(set(indexed) - set(active)),
        stale=sorted(i for i in set(active) & set(indexed) if indexed[i] != active[i]),
    )


def check(store: BankStore) -> ConsistencyReport:
    """Compare SQL's active entries with the index (under the write lock, unless read-only)."""
    if store.read_only:  # no writer can be half-way through a change
        with read_session(store.engine) as session:
            return _compare(store, session)
    with store.transaction() as (session, _undo):
        return _compare(store, session)


def _index_rows(store: BankStore, rows: list[EntryRow]) -> None:
    for start in range(0, len(rows), REINDEX_BATCH):
        chunk = rows[start : start + REINDEX_BATCH]
        vectors = store.embedder.embed([draft_of(r).text_for_embedding() for r in chunk])
        store.index.upsert([r.id for r in chunk], vectors, [index_metadata(r) for r in chunk])


def _disagreement(report: ConsistencyReport) -> BankInconsistentError:
    return BankInconsistentError(
        f"the skill bank's SQL and index disagree ({report.summary()}); "
        "run `skillrl skills reindex`"
    )


def warn_if_unsearchable(store: BankStore) -> list[str]:
    """Warn when a partition's vector files are missing or damaged; returns those partitions.

    Not repaired on open: rebuilding the index is a write the user asks for (``reindex``).
    """
    damaged = store.index.unsearchable_partitions()
    if damaged:
        logger.warning(
            "the skill bank's index at %s cannot find its own vectors in %d partition(s) (%s): "
            "their vector files are missing or damaged, so searches there return wrong entries "
            "or none; run `skillrl skills reindex` to rebuild the index from SQL",
            store.config.chroma_url or store.config.chroma_path,
            len(damaged),
            ", ".join(damaged),
        )
    return damaged


def check_on_open(store: BankStore, *, repair: bool) -> None:
    """Raise or repair (from SQL) when the stores disagree (a read-only bank only warns).

    A partition whose vectors cannot be found is only reported (:func:`warn_if_unsearchable`).
    """
    warn_if_unsearchable(store)
    if store.read_only:  # nobody can be changing it, and nothing can be repaired
        with read_session(store.engine) as session:
            report = _compare(store, session)
        if not report.ok and not repair:
            raise _disagreement(report)
        if not report.ok:
            logger.warning(
                "the skill bank's index disagrees with SQL (%s), so searches may miss entries; "
                "left as it is (opened read-only): run `skillrl skills reindex` to rebuild it",
                report.summary(),
            )
        return
    for attempt in range(2):
        with store.transaction() as (session, _undo):
            report = _compare(store, session)
            if report.ok:
                return
            if not repair:
                raise _disagreement(report)
            if attempt == 1 or store.embedder_loaded or not (report.missing or report.stale):
                logger.warning("repairing the skill-bank index from SQL: %s", report.summary())
                store.index.delete(report.extra)
                ids = report.missing + report.stale
                rows = list(session.scalars(select(EntryRow).where(EntryRow.id.in_(ids))))
                _index_rows(store, rows)
                return
        # Load the model outside the write lock (it can take seconds), then look again:
        # another process may have repaired or changed the bank meanwhile.
        store.embedder.embed(["load the model before taking the write lock"])


def reindex(store: BankStore) -> int:
    """Drop the index and rebuild it from SQL's active entries; returns how many."""
    store.require_writable()
    store.embedder.embed(["load the model before taking the write lock"])
    with store.transaction() as (session, _undo):
        rows = list(
            session.scalars(
                select(EntryRow).where(EntryRow.status == "active").order_by(EntryRow.id)
            )
        )
        store.index.clear()
        _index_rows(store, rows)
        _set_meta(session, EMBEDDER_KEY, store.config.embedder)
    logger.info("reindexed %d entries with %s", len(rows), store.config.embedder)
    return len(rows)


def _set_meta(session: Session, key: str, value: str) -> None:
    row = session.get(MetaRow, key)
    if row is None:
        session.add(MetaRow(key=key, value=value))
    else:
        row.value = value


def check_embedder(store: BankStore) -> None:
    """Refuse to mix vectors of two embedders: the index remembers which one built it."""
    wanted = store.config.embedder
    with read_session(store.engine) as session:
        row = session.get(MetaRow, EMBEDDER_KEY)
        recorded = None if row is None else row.value
    if recorded is None and not store.read_only:
        # Only a new bank records its embedder; the common case above needs no write lock.
        with store.transaction() as (session, _undo):
            row = session.get(MetaRow, EMBEDDER_KEY)
            if row is None:
                _set_meta(session, EMBEDDER_KEY, wanted)
                return
            recorded = row.value
    if recorded is not None and recorded != wanted:
        raise BankInconsistentError(
            f"the index was built with embedder {recorded!r} but {wanted!r} was asked for; "
            f"open the bank with {recorded!r}, or run `skillrl skills reindex --embedder "
            f"{wanted}` to rebuild it"
        )
