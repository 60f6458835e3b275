"""The one driver of the resumable runs: the improvement cycles and the cold start.

A run is a numbered sequence of stages (the improvement run's cycles, the cold start's rounds),
each a sequence of phases named by an enum (:class:`~trainers.cycle.run_files.CyclePhase`,
:class:`~trainers.cold_start.cold_start.ColdStartPhase`). A phase writes its own files first; the
driver then commits the run's state, so a killed run resumes at the first phase not committed and a
half-done phase finds what it already wrote.

Whoever watches a run (progress bars, a benchmark that evaluates each round, a test that kills
the run at a chosen point) subscribes to typed events, keyed by their type as smolagents keys
its step callbacks: :class:`StageStarted`, :class:`PhaseStarted`, :class:`PhaseSaved` (a phase
wrote its files, not yet committed), :class:`PhaseEnded` (committed) and
:class:`HeldOutPlayStarted` (after the last stage, the chosen one plays held-out goals).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, TypeVar


class Phase(str, Enum):
    """A phase of a run; its value is the name ``state.json`` records."""

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class StageStarted:
    """A cycle (or round) is about to run its first phase not yet committed."""

    index: int


@dataclass(frozen=True)
class PhaseStarted:
    """A phase of stage ``index`` starts."""

    index: int
    phase: Phase


@dataclass(frozen=True)
class PhaseSaved:
    """A phase wrote its files; the run's state does not record it yet.

    A kill here resumes inside the phase, with what it wrote.
    """

    index: int
    phase: Phase


@dataclass(frozen=True)
class PhaseEnded:
    """A phase is committed: ``state.json`` records it."""

    index: int
    phase: Phase


@dataclass(frozen=True)
class HeldOutPlayStarted:
    """After its last stage, the run plays the stage it chose on held-out (test) goals.

    Not emitted when it chose its starting point: those episodes were played at the start.
    """

    index: int
    """The chosen stage."""
    goals: int
    """How many held-out goals it plays."""


RunEvent = StageStarted | PhaseStarted | PhaseSaved | PhaseEnded | HeldOutPlayStarted
Event = TypeVar("Event", StageStarted, PhaseStarted, PhaseSaved, PhaseEnded, HeldOutPlayStarted)


class RunEvents:
    """Callbacks keyed by event type; each event goes to its type's callbacks, in order."""

    def __init__(self) -> None:
        self._callbacks: dict[type, list[Callable[..., None]]] = {}

    def on(self, kind: type[Event], callback: Callable[[Event], None]) -> RunEvents:
        """Call ``callback(event)`` for every event of type ``kind``; returns self (chains)."""
        self._callbacks.setdefault(kind, []).append(callback)
        return self

    def emit(self, event: RunEvent) -> None:
        """Hand ``event`` to its type's callbacks."""
        for callback in self._callbacks.get(type(event), ()):
            callback(event)


class PhasedState(Protocol):
    """What the driver needs of a run's state: which phases are done, and recording them."""

    def completed(self, index: int, phase: Phase) -> bool:
        """Whether ``phase`` of stage ``index`` is committed."""
        ...

    def finish_phase(self, index: int, phase: Phase) -> None:
        """Record ``phase`` of stage ``index`` as the last one done."""
        ...

    def finish_stage(self, index: int) -> None:
        """Record stage ``index`` as done: the next stage has no phase done."""
        ...


State = TypeVar("State", bound=PhasedState)


def phase_completed(
    order: Sequence[Phase], at_index: int, at_phase: str, index: int, phase: Phase
) -> bool:
    """Whether ``phase`` of stage ``index`` is done in a state at ``(at_index, at_phase)``.

    ``at_phase`` is the last phase done in stage ``at_index`` ("" = none); ``order`` is every
    phase a stage may run, in order (a stage that skips one, an unevaluated cycle's ``eval``,
    still orders the others by it).
    """
    if index != at_index:
        return index < at_index
    if not at_phase:
        return False
    return order.index(phase) <= order.index(type(phase)(at_phase))


def drive(
    state: State,
    indices: Iterable[int],
    phases: Callable[[int], Sequence[Phase]],
    runners: Mapping[Phase, Callable[[int, State], None]],
    *,
    commit: Callable[[State], None],
    events: RunEvents,
    barrier: Callable[[], None] = lambda: None,
) -> None:
    """Run every phase of every stage in ``indices`` that ``state`` does not record as done.

    ``phases(index)`` lists a stage's phases in order and ``runners[phase](index, state)`` runs
    one. After each phase the state is committed (``commit``), every process meets
    (``barrier``: what the phase wrote is on disk for all of them) and :class:`PhaseEnded` is
    emitted; after a stage's last phase the state moves to the next stage and is committed.
    """
    for index in indices:
        events.emit(StageStarted(index))
        for phase in phases(index):
            if state.completed(index, phase):
                continue
            events.emit(PhaseStarted(index, phase))
            runners[phase](index, state)
            state.finish_phase(index, phase)
            commit(state)
            barrier()
            events.emit(PhaseEnded(index, phase))
        state.finish_stage(index)
        commit(state)
