"""The training runs of a workspace, read from their folders (``skillrl runs``, ``--model auto``).

Only JSON files and folder names are read (no torch), so listing runs is instant. Two kinds of
run live under ``<workspace>/runs/<name>/``: a ``skillrl train`` run
(:mod:`trainers.cycle.run_files`'s layout: ``state.json``, ``checkpoints/cycle-NNNN``) and a
``skillrl sft`` run (:mod:`trainers.cold_start.cold_start`'s layout in its ``sft/`` folder:
``sft/state.json``, ``sft/checkpoints/round-NNNN``). A folder holding both is the train run
(``train --cold-start`` starts its cycles from the cold start's model). A checkpoint counts once its
folder holds a whole model (its config, weights and tokenizer, checked from file names and
safetensors headers): a folder a person or a crash left half-filled is never the default model. A
damaged ``state.json`` or ``config.json`` skips its run with one warning line naming it, so one
damaged folder never stops ``skillrl runs`` or the ``--model auto`` choice.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillrl.policies.model_folders import check_model_folder
from skillrl_core.errors import CheckpointError, DataFileError, ModelLoadError
from skillrl_core.files import read_json_object
from trainers.cycle.cycle_metrics import EVAL_SUCCESS_RATE
from trainers.cycle.run_files import RunFiles

logger = logging.getLogger(__name__)

_CHECKPOINT = re.compile(r"^cycle-(\d{4,})$")
_SFT_CHECKPOINT = re.compile(r"^round-(\d{4,})$")

TRAIN_RUN = "train"
"""The kind of a ``skillrl train`` run (improvement cycles)."""
SFT_RUN = "sft"
"""The kind of a ``skillrl sft`` run (behaviour cloning and DAgger rounds)."""


@dataclass
class RunSummary:
    """What one run folder says about itself."""

    name: str
    folder: Path
    cycles_completed: int
    """Improvement cycles whose metrics are recorded (cycle 0, the baseline, not counted);
    for an sft run, the rounds trained."""
    cycles_planned: int | None
    """``--cycles`` of the run's latest start (None when its config is unreadable); for an sft
    run, its rounds (behaviour cloning and the DAgger rounds)."""
    done: bool
    best_success: float | None
    """Highest evaluation success rate over the recorded cycles (cycle 0 included)."""
    best_cycle: int | None
    last_success: float | None
    checkpoints: list[Path] = field(default_factory=list)
    """Complete checkpoint folders, oldest cycle first."""
    updated: float = 0.0
    """Modification time of ``state.json`` (seconds since the epoch)."""
    kind: str = TRAIN_RUN
    """:data:`TRAIN_RUN` or :data:`SFT_RUN`: which command made it."""
    env_id: str | None = None
    """The environment it trained on (None when its config is unreadable)."""
    chosen_cycle: int | None = None
    """The cycle the run chose on evaluation goals that are not test goals (its ``best.json``;
    0: none beat its starting model); None: the run chose none."""

    @property
    def last_checkpoint(self) -> Path | None:
        """The checkpoint of the highest cycle, if any."""
        return self.checkpoints[-1] if self.checkpoints else None

    @property
    def played_checkpoint(self) -> Path | None:
        """The checkpoint the run leaves for ``--model auto``.

        The chosen cycle's when the run chose one (None when that is cycle 0: the run did not
        improve on the model it started from, so it offers none of its own); else the last.
        """
        if self.chosen_cycle is None:
            return self.last_checkpoint
        chosen = f"cycle-{self.chosen_cycle:04d}"
        return next((p for p in self.checkpoints if p.name == chosen), None)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "name": self.name,
            "kind": self.kind,
            "env_id": self.env_id,
            "folder": str(self.folder),
            "cycles_completed": self.cycles_completed,
            "cycles_planned": self.cycles_planned,
            "done": self.done,
            "best_success": self.best_success,
            "best_cycle": self.best_cycle,
            "last_success": self.last_success,
            "checkpoints": [str(p) for p in self.checkpoints],
            "last_checkpoint": str(self.last_checkpoint) if self.last_checkpoint else None,
            "chosen_cycle": self.chosen_cycle,
            "played_checkpoint": str(self.played_checkpoint) if self.played_checkpoint else None,
        }


def read_run(folder: Path) -> RunSummary | None:
    """Summarise one run folder (None, with a warning naming it, when its files are damaged).

    A folder with no ``state.json`` of its own but an ``sft/state.json`` is a ``skillrl sft``
    run; a folder with neither is not a run (None, silently).
    """
    files = RunFiles(folder)
    if not files.state_path.exists():
        if (folder / SFT_RUN / "state.json").exists():
            return _read_sft_run(folder)
        return None
    try:
        state = files.load_state()
        updated = files.state_path.stat().st_mtime
        config = files.load_config() if files.config_path.exists() else {}
        choice = files.load_choice()
    except (CheckpointError, OSError) as error:
        logger.warning("skipping run %s: %s", folder.name, error)
        return None
    scored = [(row[EVAL_SUCCESS_RATE], row["cycle"]) for row in state.history if _scored(row)]
    best = max(scored, key=lambda pair: (pair[0], pair[1]), default=None)
    return RunSummary(
        name=folder.name,
        folder=folder,
        cycles_completed=sum(
            1 for row in state.history if isinstance(row.get("cycle"), int) and row["cycle"] > 0
        ),
        cycles_planned=_planned(config),
        done=state.done,
        best_success=best[0] if best else None,
        best_cycle=best[1] if best else None,
        last_success=scored[-1][0] if scored else None,
        checkpoints=_checkpoints(folder / "checkpoints", _CHECKPOINT),
        updated=updated,
        kind=TRAIN_RUN,
        env_id=_env_of(config, "cycle"),
        chosen_cycle=choice.cycle if choice is not None else None,
    )


def _read_sft_run(folder: Path) -> RunSummary | None:
    """Summarise a ``skillrl sft`` run (its files are in ``folder/sft``)."""
    root = folder / SFT_RUN
    loaded = _read_state(root / "state.json")
    if loaded is None:
        return None
    state, updated = loaded
    history = [row for row in state.get("history", []) if isinstance(row, dict)]
    config = _read_config(root)
    cold_start = config.get("cold_start") if isinstance(config, dict) else None
    rounds = None
    if isinstance(cold_start, dict) and isinstance(cold_start.get("dagger_rounds"), int):
        rounds = 1 + cold_start["dagger_rounds"]  # behaviour cloning, then the DAgger rounds
    return RunSummary(
        name=folder.name,
        folder=folder,
        cycles_completed=len(history),
        cycles_planned=rounds,
        done=bool(state.get("done")),
        best_success=None,  # a cold start measures no success of its own
        best_cycle=None,
        last_success=None,
        checkpoints=_checkpoints(root / "checkpoints", _SFT_CHECKPOINT),
        updated=updated,
        kind=SFT_RUN,
        env_id=_env_of(config, "cold_start"),
    )


def list_runs(workspace: Path) -> list[RunSummary]:
    """Every run of the workspace (``train`` and ``sft``), the most recently updated first."""
    root = workspace / "runs"
    if not root.is_dir():
        return []
    runs = [read_run(p) for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return sorted((r for r in runs if r is not None), key=lambda r: (-r.updated, r.name))


@dataclass
class LatestModel:
    """The model ``--model auto`` plays for an environment, and the newer runs it passed over."""

    run: RunSummary
    """The newest run of the environment that leaves a checkpoint."""
    checkpoint: Path
    """The checkpoint that run leaves (:attr:`RunSummary.played_checkpoint`)."""
    skipped: list[RunSummary] = field(default_factory=list)
    """Newer runs with a checkpoint that trained another environment (or an unknown one)."""


def latest_checkpoint(workspace: Path, env_id: str) -> LatestModel | None:
    """Return the checkpoint the newest run of ``env_id`` leaves (None: no run leaves one).

    Runs of other environments are passed over (a WebShop policy cannot play Sokoban), and the
    newer ones among them are listed in :attr:`LatestModel.skipped` so the caller can say so.
    A run that chose a cycle on non-test evaluation goals leaves that cycle's checkpoint (none,
    when no cycle beat its start); any other run leaves its last one: its evaluation goals may
    be test goals, and a model chosen by its score on them would make later measurements on
    them optimistic.
    """
    skipped = []
    for run in list_runs(workspace):
        if run.played_checkpoint is None:
            continue
        if run.env_id != env_id:
            skipped.append(run)
            continue
        return LatestModel(run=run, checkpoint=run.played_checkpoint, skipped=skipped)
    return None


def default_models(workspace: Path) -> dict[str, Path]:
    """Return, per environment, the checkpoint ``--model auto`` plays (``skillrl runs``' marks)."""
    return default_models_among(list_runs(workspace))


def default_models_among(runs: list[RunSummary]) -> dict[str, Path]:
    """:func:`default_models` among runs already listed (newest first), read once."""
    chosen: dict[str, Path] = {}
    for run in runs:
        if run.env_id is not None and run.played_checkpoint is not None:
            chosen.setdefault(run.env_id, run.played_checkpoint)
    return chosen


def _read_state(path: Path) -> tuple[dict[str, Any], float] | None:
    try:
        state = read_json_object(path)
        updated = path.stat().st_mtime
    except (DataFileError, OSError) as error:
        logger.warning("skipping run %s: %s", path.parent, error)
        return None
    return state, updated


def _read_config(folder: Path) -> dict[str, Any]:
    try:
        return read_json_object(folder / "config.json")
    except DataFileError:
        return {}


def _env_of(config: dict[str, Any], part: str) -> str | None:
    section = config.get(part)
    env_id = section.get("env_id") if isinstance(section, dict) else None
    return env_id if isinstance(env_id, str) else None


def _scored(row: dict[str, Any]) -> bool:
    value = row.get(EVAL_SUCCESS_RATE)
    return isinstance(value, int | float) and isinstance(row.get("cycle"), int)


def _planned(config: dict[str, Any]) -> int | None:
    """``--cycles`` of the run's latest start (None: no config.json or no cycles in it)."""
    cycles = (
        config.get("cycle", {}).get("cycles") if isinstance(config.get("cycle"), dict) else None
    )
    return cycles if isinstance(cycles, int) and not isinstance(cycles, bool) and cycles else None


def _checkpoints(folder: Path, pattern: re.Pattern[str]) -> list[Path]:
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        match = pattern.match(path.name)
        if match and path.is_dir():
            try:
                check_model_folder(path)
            except ModelLoadError as error:  # not a whole model: never the default one
                logger.warning("skipping checkpoint %s: %s", path, error)
                continue
            found.append((int(match.group(1)), path))
    return [path for _cycle, path in sorted(found)]
