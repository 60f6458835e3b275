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
    from memory.bank import SkillBank

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


def _compare(bank: SkillBank, session: Session) -> ConsistencyReport:
    rows = session.execute(
        select(EntryRow.id, EntryRow.revision).where(EntryRow.status == "active")
    ).all()
    active = {entry_id: revision for entry_id, revision in rows}
    indexed = {r.id: r.metadata.get("revision") for r in bank.index.get()}
    return ConsistencyReport(
        sql_active=len(active),
        index_count=len(indexed),
        missing=sorted(set(active) - set(indexed)),
        extra=sorted(set(indexed) - set(active)),
        stale=sorted(i for i in set(active) & set(indexed) if indexed[i] != active[i]),
    )


def check(bank: SkillBank) -> ConsistencyReport:
    """Compare SQL's active entries with the index (under the write lock, unless read-only)."""
    if bank.read_only:  # no writer can be half-way through a change
        with read_session(bank.engine) as session:
            return _compare(bank, session)
    with bank.transaction() as (session, _undo):
        return _compare(bank, session)


def _index_rows(bank: SkillBank, rows: list[EntryRow]) -> None:
    for start in range(0, len(rows), REINDEX_BATCH):
        chunk = rows[start : start + REINDEX_BATCH]
        vectors = bank.embedder.embed([draft_of(r).text_for_embedding() for r in chunk])
        bank.index.upsert([r.id for r in chunk], vectors, [index_metadata(r) for r in chunk])


def _disagreement(report: ConsistencyReport) -> BankInconsistentError:
    return BankInconsistentError(
        f"the skill bank's SQL and index disagree ({report.summary()}); "
        "run `skillrl skills reindex`"
    )


def check_on_open(bank: SkillBank, *, repair: bool) -> None:
    """Raise or repair (from SQL) when the stores disagree (a read-only bank only warns)."""
    if bank.read_only:  # nobody can be changing it, and nothing can be repaired
        with read_session(bank.engine) as session:
            report = _compare(bank, session)
        if not report.ok and not repair:
            raise _disagreement(report)
        if not report.ok:
            logger.warning("the read-only skill bank's index disagrees: %s", report.summary())
        return
    for attempt in range(2):
        with bank.transaction() as (session, _undo):
            report = _compare(bank, session)
            if report.ok:
                return
            if not repair:
                raise _disagreement(report)
            if attempt == 1 or bank.embedder_loaded or not (report.missing or report.stale):
                logger.warning("repairing the skill-bank index from SQL: %s", report.summary())
                bank.index.delete(report.extra)
                ids = report.missing + report.stale
                rows = list(session.scalars(select(EntryRow).where(EntryRow.id.in_(ids))))
                _index_rows(bank, rows)
                return
        # Load the model outside the write lock (it can take seconds), then look again:
        # another process may have repaired or changed the bank meanwhile.
        bank.embedder.embed(["load the model before taking the write lock"])


def reindex(bank: SkillBank) -> int:
    """Drop the index and rebuild it from SQL's active entries; returns how many."""
    bank.require_writable()
    bank.embedder.embed(["load the model before taking the write lock"])
    with bank.transaction() as (session, _undo):
        rows = list(
            session.scalars(
                select(EntryRow).where(EntryRow.status == "active").order_by(EntryRow.id)
            )
        )
        bank.index.clear()
        _index_rows(bank, rows)
        _set_meta(session, EMBEDDER_KEY, bank.config.embedder)
    logger.info("reindexed %d entries with %s", len(rows), bank.config.embedder)
    return len(rows)


def _set_meta(session: Session, key: str, value: str) -> None:
    row = session.get(MetaRow, key)
    if row is None:
        session.add(MetaRow(key=key, value=value))
    else:
        row.value = value


def check_embedder(bank: SkillBank) -> None:
    """Refuse to mix vectors of two embedders: the index remembers which one built it."""
    wanted = bank.config.embedder
    with read_session(bank.engine) as session:
        row = session.get(MetaRow, EMBEDDER_KEY)
        recorded = None if row is None else row.value
    if recorded is None and not bank.read_only:
        # Only a new bank records its embedder; the common case above needs no write lock.
        with bank.transaction() as (session, _undo):
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
