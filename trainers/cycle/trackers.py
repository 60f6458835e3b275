"""Experiment trackers a training run reports its per-cycle metrics to (``--report-to``).

The names and their meaning are those of ``transformers.TrainingArguments.report_to``:
``tensorboard`` (the default, installed with skillrl; event files in ``runs/<name>/tensorboard``),
``wandb`` and ``trackio`` (optional extras). As transformers' ``is_wandb_available`` and
``is_trackio_available`` do, a tracker counts as installed when ``importlib.util.find_spec``
finds its package; :func:`check_tracker_installed` asks that before anything loads, so a missing
extra is refused in one line with its install command instead of after a model load.

Departure from transformers: its tracker callbacks log every optimizer step of a ``Trainer``;
here one row per completed cycle is logged (the row ``metrics.jsonl`` gets), with the cycle as
the step, so every tracker shows the same curves as ``metrics.jsonl`` and ``skillrl view``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from skillrl_core.errors import ConfigError, DependencyNotInstalled

REPORT_TO: tuple[str, ...] = ("tensorboard", "wandb", "trackio")
"""Trackers ``skillrl train --report-to`` accepts, the default first."""

TRACKER_INSTALL: dict[str, str] = {
    "tensorboard": "pip install tensorboard",
    "wandb": "pip install 'skillrl[wandb]'",
    "trackio": "pip install 'skillrl[trackio]'",
}
"""The command that installs each tracker (``wandb`` and ``trackio`` are skillrl extras)."""

_PACKAGES: dict[str, tuple[str, ...]] = {
    "tensorboard": ("torch", "tensorboard"),
    "wandb": ("wandb",),
    "trackio": ("trackio",),
}

DEFAULT_PROJECT = "skillrl"
"""Project of a wandb or trackio run unless ``WANDB_PROJECT`` / ``TRACKIO_PROJECT`` names one
(the variables transformers' callbacks read)."""


def check_tracker_installed(report_to: str) -> None:
    """Raise unless ``report_to`` is a known tracker whose package can be imported.

    Cheap (no import): safe to call before a model loads.
    """
    if report_to not in REPORT_TO:
        raise ConfigError(f"report_to ({report_to!r}) must be one of {', '.join(REPORT_TO)}")
    if any(importlib.util.find_spec(p) is None for p in _PACKAGES[report_to]):
        raise DependencyNotInstalled(
            f"--report-to {report_to} needs the {report_to} package: {TRACKER_INSTALL[report_to]}"
        )


def scalar_metrics(row: dict[str, Any]) -> dict[str, float]:
    """Return a cycle row's numeric metrics (booleans, texts and the cycle itself left out)."""
    return {
        key: float(value)
        for key, value in row.items()
        if key != "cycle" and isinstance(value, int | float) and not isinstance(value, bool)
    }


class MetricsTracker(Protocol):
    """Where a run's per-cycle metrics go besides ``metrics.jsonl``."""

    def log(self, row: dict[str, Any]) -> None:
        """Record one completed cycle's row (``row["cycle"]`` is the step)."""
        ...

    def close(self) -> None:
        """Flush and end the tracker's run."""
        ...


@dataclass
class TensorBoardTracker:
    """Event files in the run folder, one scalar per metric (``.`` in a name becomes ``/``)."""

    folder: Path
    """The run's ``tensorboard/`` folder."""

    def log(self, row: dict[str, Any]) -> None:
        """Write the row; events a killed run wrote for this cycle are dropped first."""
        from torch.utils.tensorboard import SummaryWriter

        step = int(row["cycle"])
        # purge_step drops events a killed run wrote for this cycle before it was redone.
        with SummaryWriter(str(self.folder), purge_step=step) as writer:
            for key, value in scalar_metrics(row).items():
                writer.add_scalar(key.replace(".", "/"), value, step)

    def close(self) -> None:
        """Nothing stays open between cycles."""


@dataclass
class HostedTracker:
    """A wandb or trackio run: both modules offer ``init``, ``log(metrics, step=)``, ``finish``.

    The run's id is derived from the run folder, and ``resume="allow"`` is passed, so a
    ``skillrl train --resume`` goes on logging into the same tracker run.
    """

    report_to: str
    """``wandb`` or ``trackio``."""
    run_folder: Path
    """The run's folder (its name names the tracker run)."""
    config: dict[str, Any]
    """The run's settings (what its ``config.json`` holds), shown beside the curves."""
    _run: Any = None

    def _start(self) -> Any:
        module = importlib.import_module(self.report_to)
        name = self.run_folder.name
        if self.report_to == "wandb":
            project = os.environ.get("WANDB_PROJECT", DEFAULT_PROJECT)
            return module.init(
                project=project,
                name=name,
                id=tracker_run_id(self.run_folder),
                resume="allow",
                dir=str(self.run_folder),
                config=self.config,
            )
        project = os.environ.get("TRACKIO_PROJECT", DEFAULT_PROJECT)
        module.init(project=project, name=name, config=self.config, resume="allow")
        return module

    def log(self, row: dict[str, Any]) -> None:
        """Log the row's numbers at step ``row["cycle"]`` (the tracker run starts on first use)."""
        if self._run is None:
            self._run = self._start()
        self._run.log(scalar_metrics(row), step=int(row["cycle"]))

    def close(self) -> None:
        """Finish the tracker run, if one was started."""
        if self._run is not None:
            self._run.finish()
            self._run = None


def tracker_run_id(run_folder: Path) -> str:
    """Return a stable tracker run id: the folder's name and a short hash of its absolute path."""
    digest = hashlib.sha1(str(run_folder.resolve()).encode()).hexdigest()[:8]
    return f"{run_folder.name}-{digest}"


def open_tracker(report_to: str, run_folder: Path, config: dict[str, Any]) -> MetricsTracker:
    """Return the tracker ``report_to`` names for the run in ``run_folder`` (checked first)."""
    check_tracker_installed(report_to)
    if report_to == "tensorboard":
        return TensorBoardTracker(run_folder / "tensorboard")
    return HostedTracker(report_to, run_folder, config)
