"""Storing paired-rollout figures: each measurement's pairs added to its entries' counters.

The figures (``Entry.paired``, a :class:`~memory.types.PairedEvidence`) accumulate across
measurements, as the episode statistics accumulate across saved episodes: a second measurement
of the same entry adds its pairs to the first one's. They are what ``skillrl skills show``
prints and what bank upkeep's paired rule reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sqlalchemy import bindparam, select, update

from memory.models import EntryRow
from memory.types import PairedEvidence
from skillrl_core.errors import SkillNotFoundError

if TYPE_CHECKING:
    from memory.bank import SkillBank


def add_paired_evidence(bank: SkillBank, evidence: Mapping[str, PairedEvidence]) -> None:
    """Add each entry's new pairs to its stored figures, in one transaction.

    An id that names no entry raises :class:`SkillNotFoundError` and nothing is written.
    """
    measured = {entry_id: e for entry_id, e in evidence.items() if e.pairs}
    if not measured:
        return
    with bank.store.transaction() as (session, _undo):
        found = set(session.scalars(select(EntryRow.id).where(EntryRow.id.in_(list(measured)))))
        missing = sorted(set(measured) - found)
        if missing:
            raise SkillNotFoundError(f"no skill-bank entry has id {', '.join(missing[:5])}")
        table = EntryRow.__table__
        bump = (
            update(table)
            .where(table.c.id == bindparam("b_id"))
            .values(
                paired_pairs=table.c.paired_pairs + bindparam("b_pairs"),
                paired_with_only=table.c.paired_with_only + bindparam("b_with"),
                paired_without_only=table.c.paired_without_only + bindparam("b_without"),
                paired_score_delta_sum=table.c.paired_score_delta_sum + bindparam("b_delta"),
            )
        )
        session.connection().execute(
            bump,
            [
                {
                    "b_id": entry_id,
                    "b_pairs": e.pairs,
                    "b_with": e.with_only,
                    "b_without": e.without_only,
                    "b_delta": e.score_delta_sum,
                }
                for entry_id, e in sorted(measured.items())
            ],
        )
