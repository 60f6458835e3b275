"""The training runs of a workspace, read from their folders (``skillrl runs``, ``--model auto``).

Only JSON files and folder names are read (no torch), so listing runs is instant. The layout is
:mod:`trainers.run_files`'s; a checkpoint counts once its folder is complete (it is renamed
into place only then, so a ``cycle-NNNN`` folder with a ``config.json`` is a whole model).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    """Summarise one run folder (None when it holds no readable ``state.json``)."""
    state_path = folder / "state.json"
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        updated = state_path.stat().st_mtime
    except (OSError, json.JSONDecodeError) as error:
        if state_path.exists():
            logger.warning("skipping run %s: %s", folder, error)
        return None
    history = [row for row in state.get("history", []) if isinstance(row, dict)]
    scored = [(row["eval.success_rate"], row["cycle"]) for row in history if _scored(row)]
    best = max(scored, key=lambda pair: (pair[0], pair[1]), default=None)
    return RunSummary(
        name=folder.name,
        folder=folder,
        cycles_completed=sum(1 for row in history if row.get("cycle", 0) > 0),
        cycles_planned=_planned(folder),
        done=bool(state.get("done")),
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
    for run in list_runs(workspace):
        if run.last_checkpoint is not None:
            return run, run.last_checkpoint
    return None


def _scored(row: dict[str, Any]) -> bool:
    value = row.get("eval.success_rate")
    return isinstance(value, int | float) and isinstance(row.get("cycle"), int)


def _planned(folder: Path) -> int | None:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        return int(config["cycle"]["cycles"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def _checkpoints(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        match = _CHECKPOINT.match(path.name)
        if match and (path / "config.json").is_file():
            found.append((int(match.group(1)), path))
    return [path for _cycle, path in sorted(found)]
