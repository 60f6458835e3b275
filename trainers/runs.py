"""The training runs of a workspace, read from their folders (``skillrl runs``, ``--model auto``).

Only JSON files and folder names are read (no torch), so listing runs is instant. Two kinds of
run live under ``<workspace>/runs/<name>/``: a ``skillrl train`` run (:mod:`trainers.run_files`'s
layout: ``state.json``, ``checkpoints/cycle-NNNN``) and a ``skillrl sft`` run
(:mod:`trainers.cold_start`'s layout in its ``sft/`` folder: ``sft/state.json``,
``sft/checkpoints/round-NNNN``). A folder holding both is the train run (``train --cold-start``
starts its cycles from the cold start's model). A checkpoint counts once its folder is complete
(it is renamed into place only then, so a checkpoint folder with a ``config.json`` is a whole
model).
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

    @property
    def last_checkpoint(self) -> Path | None:
        """The checkpoint of the highest cycle, if any."""
        return self.checkpoints[-1] if self.checkpoints else None

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
        }


def read_run(folder: Path) -> RunSummary | None:
    """Summarise one run folder (None when it holds no readable ``state.json``).

    A folder with no ``state.json`` of its own but an ``sft/state.json`` is a ``skillrl sft``
    run.
    """
    if not (folder / "state.json").exists() and (folder / SFT_RUN / "state.json").exists():
        return _read_sft_run(folder)
    loaded = _read_state(folder / "state.json")
    if loaded is None:
        return None
    state, updated = loaded
    history = [row for row in state.get("history", []) if isinstance(row, dict)]
    scored = [(row["eval.success_rate"], row["cycle"]) for row in history if _scored(row)]
    best = max(scored, key=lambda pair: (pair[0], pair[1]), default=None)
    config = _read_config(folder)
    return RunSummary(
        name=folder.name,
        folder=folder,
        cycles_completed=sum(1 for row in history if row.get("cycle", 0) > 0),
        cycles_planned=_planned(config),
        done=bool(state.get("done")),
        best_success=best[0] if best else None,
        best_cycle=best[1] if best else None,
        last_success=scored[-1][0] if scored else None,
        checkpoints=_checkpoints(folder / "checkpoints", _CHECKPOINT),
        updated=updated,
        kind=TRAIN_RUN,
        env_id=_env_of(config, "cycle"),
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
    """The newest run of the environment that saved a checkpoint."""
    checkpoint: Path
    """That run's last checkpoint."""
    skipped: list[RunSummary] = field(default_factory=list)
    """Newer runs with a checkpoint that trained another environment (or an unknown one)."""


def latest_checkpoint(workspace: Path, env_id: str) -> LatestModel | None:
    """Return the last checkpoint of the newest run of ``env_id`` that has one (None: none has).

    Runs of other environments are passed over (a WebShop policy cannot play Sokoban), and the
    newer ones among them are listed in :attr:`LatestModel.skipped` so the caller can say so.
    The last checkpoint, not the best-scoring one: the best is picked on the evaluation goals,
    and choosing a model by its score on them would make later measurements on them optimistic.
    """
    skipped = []
    for run in list_runs(workspace):
        if run.last_checkpoint is None:
            continue
        if run.env_id != env_id:
            skipped.append(run)
            continue
        return LatestModel(run=run, checkpoint=run.last_checkpoint, skipped=skipped)
    return None


def default_models(workspace: Path) -> dict[str, Path]:
    """Return, per environment, the checkpoint ``--model auto`` plays (``skillrl runs``' marks)."""
    chosen: dict[str, Path] = {}
    for run in list_runs(workspace):
        if run.env_id is not None and run.last_checkpoint is not None:
            chosen.setdefault(run.env_id, run.last_checkpoint)
    return chosen


def _read_state(path: Path) -> tuple[dict[str, Any], float] | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        updated = path.stat().st_mtime
    except (OSError, json.JSONDecodeError) as error:
        if path.exists():
            logger.warning("skipping run %s: %s", path.parent, error)
        return None
    if not isinstance(state, dict):
        logger.warning("skipping run %s: %s holds no JSON object", path.parent, path.name)
        return None
    return state, updated


def _read_config(folder: Path) -> dict[str, Any]:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return config if isinstance(config, dict) else {}


def _env_of(config: dict[str, Any], part: str) -> str | None:
    section = config.get(part)
    env_id = section.get("env_id") if isinstance(section, dict) else None
    return env_id if isinstance(env_id, str) else None


def _scored(row: dict[str, Any]) -> bool:
    value = row.get("eval.success_rate")
    return isinstance(value, int | float) and isinstance(row.get("cycle"), int)


def _planned(config: dict[str, Any]) -> int | None:
    try:
        return int(config["cycle"]["cycles"])
    except (KeyError, TypeError, ValueError):
        return None


def _checkpoints(folder: Path, pattern: re.Pattern[str]) -> list[Path]:
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        match = pattern.match(path.name)
        if match and (path / "config.json").is_file():
            found.append((int(match.group(1)), path))
    return [path for _cycle, path in sorted(found)]
