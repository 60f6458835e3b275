"""The training runs of a workspace, read from their folders (``skillrl runs``, ``--model auto``).

Only JSON files and folder names are read (no torch), so listing runs is instant. The layout is
:mod:`trainers.run_files`'s; a checkpoint counts once its folder holds a whole model (its
config, weights and tokenizer, checked from file names and safetensors headers): a folder a
person or a crash left half-filled is never the default model.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillrl.policies.model_folders import check_model_folder
from skillrl_core.errors import CheckpointError, ModelLoadError
from trainers.run_files import RunFiles

logger = logging.getLogger(__name__)

_CHECKPOINT = re.compile(r"^cycle-(\d{4,})$")


@dataclass
class RunSummary:
    """What one run folder says about itself."""

    name: str
    folder: Path
    cycles_completed: int
    """Improvement cycles whose metrics are recorded (cycle 0, the baseline, not counted)."""
    cycles_planned: int | None
    """``--cycles`` of the run's latest start (None when its config is unreadable)."""
    done: bool
    best_success: float | None
    """Highest evaluation success rate over the recorded cycles (cycle 0 included)."""
    best_cycle: int | None
    last_success: float | None
    checkpoints: list[Path] = field(default_factory=list)
    """Complete checkpoint folders, oldest cycle first."""
    updated: float = 0.0
    """Modification time of ``state.json`` (seconds since the epoch)."""

    @property
    def last_checkpoint(self) -> Path | None:
        """The checkpoint of the highest cycle, if any."""
        return self.checkpoints[-1] if self.checkpoints else None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "name": self.name,
            "folder": str(self.folder),
            "cycles_completed": self.cycles_completed,
            "cycles_planned": self.cycles_planned,
            "done": self.done,
            "best_success": self.best_success,
            "best_cycle": self.best_cycle,
            "last_success": self.last_success,
            "checkpoints": [str(p) for p in self.checkpoints],
            "last_checkpoint": str(self.last_checkpoint) if self.last_checkpoint else None,
        }


def read_run(folder: Path) -> RunSummary | None:
    """Summarise one run folder (None, with a warning naming it, when its files are damaged).

    A folder without ``state.json`` is not a run (None, silently). A damaged ``state.json`` or
    ``config.json`` skips the run with one warning line, so that one damaged folder never stops
    ``skillrl runs`` or the ``--model auto`` choice.
    """
    files = RunFiles(folder)
    if not files.state_path.exists():
        return None
    try:
        state = files.load_state()
        updated = files.state_path.stat().st_mtime
        planned = _planned(files)
    except (CheckpointError, OSError) as error:
        logger.warning("skipping run %s: %s", folder.name, error)
        return None
    scored = [(row["eval.success_rate"], row["cycle"]) for row in state.history if _scored(row)]
    best = max(scored, key=lambda pair: (pair[0], pair[1]), default=None)
    return RunSummary(
        name=folder.name,
        folder=folder,
        cycles_completed=sum(
            1 for row in state.history if isinstance(row.get("cycle"), int) and row["cycle"] > 0
        ),
        cycles_planned=planned,
        done=state.done,
        best_success=best[0] if best else None,
        best_cycle=best[1] if best else None,
        last_success=scored[-1][0] if scored else None,
        checkpoints=_checkpoints(folder / "checkpoints"),
        updated=updated,
    )


def list_runs(workspace: Path) -> list[RunSummary]:
    """Every run of the workspace, the most recently updated first."""
    root = workspace / "runs"
    if not root.is_dir():
        return []
    runs = [read_run(p) for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return sorted((r for r in runs if r is not None), key=lambda r: (-r.updated, r.name))


def latest_checkpoint(workspace: Path) -> tuple[RunSummary, Path] | None:
    """Return the last checkpoint of the newest run that has one (None: no run has one).

    The last checkpoint, not the best-scoring one: the best is picked on the evaluation goals,
    and choosing a model by its score on them would make later measurements on them optimistic.
    """
    return newest_checkpoint(list_runs(workspace))


def newest_checkpoint(runs: list[RunSummary]) -> tuple[RunSummary, Path] | None:
    """:func:`latest_checkpoint` among runs already listed (newest first)."""
    for run in runs:
        if run.last_checkpoint is not None:
            return run, run.last_checkpoint
    return None


def _scored(row: dict[str, Any]) -> bool:
    value = row.get("eval.success_rate")
    return isinstance(value, int | float) and isinstance(row.get("cycle"), int)


def _planned(files: RunFiles) -> int | None:
    """``--cycles`` of the run's latest start (None: no config.json); damage raises."""
    if not files.config_path.exists():
        return None
    return int(files.load_config().get("cycle", {}).get("cycles", 0)) or None


def _checkpoints(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        match = _CHECKPOINT.match(path.name)
        if match and path.is_dir():
            try:
                check_model_folder(path)
            except ModelLoadError as error:  # not a whole model: never the default one
                logger.warning("skipping checkpoint %s: %s", path, error)
                continue
            found.append((int(match.group(1)), path))
    return [path for _cycle, path in sorted(found)]
