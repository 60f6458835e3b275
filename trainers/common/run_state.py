"""Where a phased run stands: its ``state.json``, one shape for both trainers.

Both resumable runs, the improvement cycle (:class:`~trainers.cycle.run_files.RunState`) and the
cold start (:class:`~trainers.cold_start.cold_start.ColdStartState`), commit one shape after
every phase (:class:`PhasedRunState`): the stage in progress, its last completed phase, whether
the run is done, one metrics row per completed stage and the metrics of the stage in progress.
Each trainer names its stage field (``cycle``, ``round``) and that name is also the key in
``state.json``, so ``dataclasses.asdict`` is the file's object and run folders written before
this module resume unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from skillrl_core.errors import CheckpointError, DataFileError
from skillrl_core.files import read_json_object
from trainers.common.phased_run import Phase, phase_completed

STATE_FILE = "state.json"
"""Name of a run folder's state file: written last in each phase, the phase's commit point."""
CONFIG_FILE = "config.json"
"""Name of a run folder's settings file, compared on resume."""


@dataclass
class PhasedRunState:
    """Where a run of stages of phases stands; a subclass declares its stage field and phases.

    The stage field is an ``int`` field of the subclass named by :attr:`stage_field`: the stage
    in progress (once ``done``: the next one a longer run would do).
    """

    stage_field: ClassVar[str]
    """Name of the subclass's stage field (``cycle``, ``round``), in memory and in state.json."""
    phases: ClassVar[type[Phase]]
    """The phases of a stage, in order."""

    phase: str = ""
    """The last completed phase of the stage in progress ("" = none yet)."""
    done: bool = False
    """Every stage completed."""
    history: list[dict[str, Any]] = field(default_factory=list)
    """Metrics of every completed stage, in order."""
    current: dict[str, Any] = field(default_factory=dict)
    """Metrics gathered so far in the stage in progress."""

    @property
    def stage(self) -> int:
        """The stage in progress (the value of the subclass's stage field)."""
        return getattr(self, self.stage_field)

    @stage.setter
    def stage(self, index: int) -> None:
        setattr(self, self.stage_field, index)

    @classmethod
    def from_dict(cls: type[StateT], data: Mapping[str, Any]) -> StateT:
        """Build a state from ``state.json``'s object; ValueError names a field of a wrong type."""
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown)}")
        state = cls(**data)
        state.check_fields()
        return state

    def to_dict(self) -> dict[str, Any]:
        """Return ``state.json``'s object (the stage under its field's name)."""
        return asdict(self)

    def check_fields(self) -> None:
        """Raise ValueError naming the first field of a wrong type or value.

        A subclass with fields of its own extends this (after ``super().check_fields()``).
        """
        check_count(self.stage_field, self.stage)
        names = [phase.value for phase in self.phases]
        if self.phase not in ("", *names):
            raise ValueError(f"'phase' ({self.phase!r}) must be one of {', '.join(names)}")
        if not isinstance(self.done, bool):
            raise ValueError(f"'done' ({self.done!r}) must be true or false")
        if not isinstance(self.history, list) or not all(
            isinstance(row, dict) for row in self.history
        ):
            raise ValueError("'history' must be a list of objects")
        if not isinstance(self.current, dict):
            raise ValueError("'current' must be an object")

    def completed(self, index: int, phase: Phase) -> bool:
        """Whether ``phase`` of stage ``index`` is already done."""
        return phase_completed(list(self.phases), self.stage, self.phase, index, phase)

    def finish_phase(self, index: int, phase: Phase) -> None:
        """Record ``phase`` of stage ``index`` as the last one done."""
        self.stage, self.phase = index, phase.value

    def finish_stage(self, index: int) -> None:
        """Record stage ``index`` as done: the next one starts with no phase done and no metrics."""
        self.stage, self.phase, self.current = index + 1, "", {}


StateT = TypeVar("StateT", bound=PhasedRunState)


def check_count(name: str, value: Any) -> None:
    """Raise ValueError naming field ``name`` unless ``value`` is an integer >= 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name!r} ({value!r}) must be an integer >= 0")


def read_run_state(path: Path, state_type: type[StateT], what: str) -> StateT:
    """Read a ``state.json``; CheckpointError naming the file when it is missing or damaged.

    ``what`` names the run in the advice that ends the message ("run", "cold-start run").
    """
    advice = f"the {what} cannot be resumed or listed: start a new one (another --run-name)"
    try:
        data = read_json_object(path)
    except DataFileError as error:
        raise CheckpointError(f"{error}; {advice}") from error
    try:
        return state_type.from_dict(data)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{path} is damaged: {error}; {advice}") from error
