"""Retrievals of a training rollout, held back until the rollout phase commits.

A rollout phase can take minutes and may be killed half-way; ``--resume`` then plays it again.
Had every turn's retrieval gone straight to the bank (``retrieval_events`` rows and the entries'
``times_retrieved``), the killed attempt's retrievals would be counted on top of the redone
ones. So the trainer's rollouts retrieve with ``record=False`` through
:class:`DeferredRetrievals`, which keeps the events in memory; the rollout phase writes them
into ``cycles/<c>/rollout.json`` with its episodes and hands them to the bank with
:func:`record_deferred` when it commits the phase.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetrievalEvent:
    """One entry put into one turn's prompt (what the bank's ``retrieval_events`` row holds)."""

    entry_id: str
    similarity: float
    env: str
    category: str | None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RetrievalEvent:
        """Rebuild an event that :meth:`to_dict` wrote."""
        return cls(
            entry_id=str(data["entry_id"]),
            similarity=float(data["similarity"]),
            env=str(data["env"]),
            category=data.get("category"),
        )


class DeferredRetrievals:
    """A skill bank stand-in for the rollout engine: retrieves, but records nothing yet.

    Every other attribute is the wrapped bank's own.
    """

    def __init__(self, bank: Any) -> None:
        self._bank = bank
        self.events: list[RetrievalEvent] = []

    def retrieve(self, queries: list[Any], config: Any = None, *, record: bool = True) -> Any:
        """Retrieve from the bank without recording; keep the events when ``record`` is set."""
        results = self._bank.retrieve(queries, config, record=False)
        if record:
            self.events.extend(
                RetrievalEvent(r.entry.id, float(r.similarity), query.env, query.category)
                for query, result in zip(queries, results, strict=True)
                for r in result.all
            )
        return results

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bank, name)


def record_deferred(bank: Any, events: list[RetrievalEvent]) -> int:
    """Write held-back events through the bank's own recorder; returns how many were written.

    Entries that no longer exist are skipped (nothing removes entries during a rollout, but a
    person may have edited the bank between a kill and ``--resume``).
    """
    from memory.retrieval import record_events
    from memory.types import RetrievalQuery, RetrievedEntry, RetrievedSkills

    entries = bank.entries(sorted({e.entry_id for e in events}))
    queries, results = [], []
    for event in events:
        entry = entries.get(event.entry_id)
        if entry is None:
            logger.warning("retrieved entry %s no longer exists; not counted", event.entry_id)
            continue
        # record_events reads only the query's env and category and each hit's entry id and
        # similarity: one single-hit result per event reproduces the original rows exactly.
        queries.append(RetrievalQuery("", "", env=event.env, category=event.category))
        results.append(RetrievedSkills(general=[RetrievedEntry(entry, event.similarity)]))
    record_events(bank, queries, results)
    return len(results)
