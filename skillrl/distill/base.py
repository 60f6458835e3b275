"""The distiller contract: finished episodes in, entry drafts out; plus the reports it yields.

A :class:`Distiller` is pure with respect to the bank: it reads :class:`EpisodeRecord` objects and
proposes :class:`EntryDraft` objects. Writing them (merge on insert, marking episodes distilled) is
the job of :func:`skillrl.distill.pipeline.distill_pending`, so every distiller gets the same
idempotence and the same all-or-nothing bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from memory.types import EntryDraft
from skillrl_core.records import EpisodeRecord


@runtime_checkable
class Distiller(Protocol):
    """Turns finished episodes into skills (from successes) and notes (from failures)."""

    name: str
    """Short name recorded as the source (``analytic``, ``teacher``)."""

    def distill(self, episodes: list[EpisodeRecord]) -> list[EntryDraft]:
        """Return the drafts distilled from ``episodes`` (may be empty; never writes anything)."""
        ...


@dataclass
class Rejection:
    """A draft the distiller produced but refused to keep, and why."""

    title: str
    reasons: list[str]
    episode_ids: list[str] = field(default_factory=list)


@dataclass
class DistillReport:
    """What one distillation pass did to the bank."""

    distiller: str
    episodes_seen: int = 0
    """Undistilled episodes found."""
    episodes_distilled: int = 0
    """Episodes marked distilled by this pass."""
    drafts: int = 0
    """Drafts proposed by the distiller (after deduplication within the pass)."""
    added: list[str] = field(default_factory=list)
    """Ids of new entries."""
    merged: list[str] = field(default_factory=list)
    """Ids of existing entries that a draft strengthened (merge on insert)."""
    rejected: list[Rejection] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        """Whether the pass wrote anything."""
        return bool(self.added or self.merged or self.episodes_distilled)
