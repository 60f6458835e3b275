"""Where each stored episode came from: its run and cycle, and the model that played it.

The bank stores a training cycle's rollout episodes without saying which run played them; the
run folder does (``cycles/<c>/rollout.json`` lists them by id). So the run and cycle of an
episode are read from the runs folder, never guessed from a group id. A run's rollouts are read
again only when their file changes, so the episodes page stays quick while a run writes.

The agent an episode records names its model as it was loaded, often an absolute path
(``transformers:/home/me/.cache/skillrl/runs/r1/checkpoints/cycle-0003``); the view shows a
portable name instead (``transformers:r1/cycle-0003``), which says the same on every machine.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from skillrl_core.errors import CheckpointError
from trainers.cycle.run_files import RunFiles

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EpisodeOrigin:
    """The training run and cycle whose rollout played an episode."""

    run: str
    """The run's folder name."""
    cycle: int
    """The cycle whose rollout it was."""


class OriginIndex:
    """Episode id -> :class:`EpisodeOrigin` over a runs folder, re-read per changed file."""

    def __init__(self, runs_dir: Path | None) -> None:
        self._runs_dir = runs_dir
        self._files: dict[Path, tuple[float, list[str]]] = {}
        """Each ``rollout.json`` read: its modification time and the episode ids it holds."""

    def origins(self) -> dict[str, EpisodeOrigin]:
        """Return the origin of every episode a run folder's rollouts hold."""
        found: dict[str, EpisodeOrigin] = {}
        if self._runs_dir is None or not self._runs_dir.is_dir():
            return found
        for folder in sorted(p for p in self._runs_dir.iterdir() if p.is_dir()):
            files = RunFiles(folder)
            for cycle in files.rollout_cycles():
                for episode_id in self._episode_ids(files, cycle):
                    found.setdefault(episode_id, EpisodeOrigin(folder.name, cycle))
        return found

    def _episode_ids(self, files: RunFiles, cycle: int) -> list[str]:
        path = files.cycle_dir(cycle) / "rollout.json"
        try:
            changed = path.stat().st_mtime
        except OSError:
            return []
        cached = self._files.get(path)
        if cached is not None and cached[0] == changed:
            return cached[1]
        try:
            phase = files.load_rollout(cycle)
        except CheckpointError as error:  # a damaged rollout hides its episodes' origin only
            logger.warning("episodes of %s have no run shown: %s", path, error)
            phase = None
        ids = [e.episode_id for e in phase.episodes] if phase is not None else []
        self._files[path] = (changed, ids)
        return ids


def portable_agent(agent: str, runs_dir: Path | None = None) -> str:
    """Return ``agent`` with its model named portably: never an absolute path.

    A model inside the runs folder is named ``<run>/<checkpoint>``; any other absolute path by
    its last two parts (``…/webshop-lora``), which name an adapter or a hub snapshot well enough.
    """
    backend, sep, model = agent.partition(":")
    if not sep:
        backend, model = "", agent
    if not _absolute(model):
        return agent
    path = Path(model)
    if runs_dir is not None:
        try:
            parts = path.relative_to(runs_dir).parts
        except ValueError:
            parts = ()
        if parts:  # <run>/checkpoints/cycle-0003 -> <run>/cycle-0003
            shown = "/".join(p for p in parts if p not in ("checkpoints", "sft"))
            return f"{backend}{sep}{shown}"
    tail = "/".join(PurePosixPath(model.replace("\\", "/")).parts[-2:])
    return f"{backend}{sep}…/{tail}"


def _absolute(model: str) -> bool:
    return (
        model.startswith(("/", "~", "\\"))
        or PureWindowsPath(model).is_absolute()
        or PureWindowsPath(model).drive != ""
    )
