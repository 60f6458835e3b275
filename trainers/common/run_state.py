"""Where a phased run stands (its ``state.json``), and how its folder starts or resumes.

Both resumable runs, the improvement cycle (:class:`~trainers.cycle.run_files.RunState`) and the
cold start (:class:`~trainers.cold_start.cold_start.ColdStartState`), commit one shape after
every phase (:class:`PhasedRunState`): the stage in progress, its last completed phase, whether
the run is done, one metrics row per completed stage and the metrics of the stage in progress.
Each trainer names its stage field (``cycle``, ``round``) and that name is also the key in
``state.json``, so ``dataclasses.asdict`` is the file's object and run folders written before
this module resume unchanged.

:func:`prepare_run_folder` is the one start of both runs: a new folder gets the run's settings
(``config.json``) and a fresh state; a resumed one is read, cleared of the temp files a killed
write left, checked against today's settings by the trainer, and given its settings again.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from skillrl_core.errors import CheckpointError, DataFileError
from skillrl_core.files import atomic_write_json, read_json_object
from trainers.common.phased_run import Phase, phase_completed

logger = logging.getLogger(__name__)

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


def remove_stale_temps_under(root: Path) -> list[Path]:
    """Delete the temp files and folders a killed run left anywhere in its folder ``root``.

    Every writer of a run folder names its temp ``.<target>.<random>.tmp`` (``.<target>.old``
    while a folder is swapped) beside the target; a resume calls this before redoing the
    unfinished phase, which writes them all again. Returns what was removed.
    """
    if not root.is_dir():
        return []
    stale = [
        p
        for p in root.rglob(".*")
        if p.name.endswith((".tmp", ".tmp.png", ".old")) and p.name.count(".") >= 2
    ]
    for path in stale:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if stale:
        logger.info("removed %d stale temp file(s) from %s", len(stale), root)
    return stale


def prepare_run_folder(
    root: Path,
    settings: Mapping[str, Any],
    *,
    resume: bool,
    what: str,
    state_type: type[StateT],
    check_resume: Callable[[StateT], Mapping[str, Any]],
) -> StateT:
    """Start a run in folder ``root``, or resume the one there; returns the state to go on from.

    Without ``resume``, a folder already holding a run (a ``state.json``) is refused with a
    CheckpointError; otherwise ``settings`` become ``config.json`` and a fresh ``state_type()``
    its ``state.json``. With ``resume``, the state is read (:func:`read_run_state`), the temps a
    killed write left are removed, and ``check_resume(state)`` compares the saved settings with
    today's (raising CheckpointError: nothing more is written) and returns the settings to save,
    which replace ``config.json``. ``what`` names the run in messages ("run", "cold-start run").
    """
    state_path, config_path = root / STATE_FILE, root / CONFIG_FILE
    if not resume:
        if state_path.exists():
            raise CheckpointError(
                f"{root} already holds a {what}; pass --resume to continue it "
                "or choose another --run-name"
            )
        atomic_write_json(config_path, dict(settings))
        state = state_type()
        atomic_write_json(state_path, state.to_dict())
        return state
    state = read_run_state(state_path, state_type, what)
    remove_stale_temps_under(root)  # e.g. a half-written checkpoint of a killed save
    atomic_write_json(config_path, dict(check_resume(state)))
    return state
