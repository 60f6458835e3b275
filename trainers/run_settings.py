"""What a training run's ``config.json`` holds, and the check that a resume keeps it.

``config.json`` is the one file of a run's settings: the :class:`CycleConfig` and
:class:`GRPOConfig` it runs with (compared on ``--resume``) and, when the run was launched by a
command, that command's resolved options (``options``: option name -> plain value), which
``skillrl train --resume`` and ``--config <run>/config.json`` read back. Cheap (JSON only, no
torch): the CLI checks a ``--resume`` before it loads a model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any

from skillrl_core.errors import CheckpointError
from trainers.config import CycleConfig, GRPOConfig
from trainers.run_files import RunFiles

_ADDED_SINCE: dict[str, dict[str, Any]] = {
    "cycle": {"eval_every": 1},
    "grpo": {"whole_group_steps": False},
}
"""Settings added after runs could be started, with the value that runs without them had: a
run saved before ``whole_group_steps`` shuffled turns across groups, and resumes with
``--shuffled-turns``; one saved before ``eval_every`` evaluated every cycle."""


_RENAMED_SINCE: dict[str, dict[str, str]] = {"grpo": {"step_advantage_weight": "step_weight"}}
"""Settings saved under an older name: read under the current one."""

_REMOVED_SINCE: dict[str, tuple[str, ...]] = {"cycle": ("train_temperature",)}
"""Settings that are now another setting (``cycle.train_temperature`` is ``grpo.temperature``,
which runs saved beside it with the same value): left out of the comparison."""


def run_settings(
    config: CycleConfig, grpo: GRPOConfig, options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return what a run's ``config.json`` holds (``options`` only when given)."""
    settings: dict[str, Any] = {"cycle": asdict(config), "grpo": asdict(grpo)}
    if options is not None:
        settings["options"] = dict(options)
    return settings


def saved_options(files: RunFiles) -> dict[str, Any] | None:
    """Return the launch options saved in a run's ``config.json`` (None: none were saved)."""
    if not files.config_path.is_file():
        return None
    options = files.load_config().get("options")
    return dict(options) if isinstance(options, dict) else None


def check_resume_settings(files: RunFiles, config: CycleConfig, grpo: GRPOConfig) -> dict[str, Any]:
    """Raise CheckpointError unless the run in ``files`` was started with these settings.

    Only ``cycles`` and ``report_to`` may differ. Returns what the run's ``config.json``
    holds. Cheap (one JSON read): the CLI calls it before loading a model.
    """
    saved = files.load_config()
    before, now = _identity(saved), _identity(run_settings(config, grpo))
    if before != now:
        changed = _changed(before, now)
        raise CheckpointError(
            f"--resume with different settings than {files.config_path} ({changed}): "
            "only --cycles and --report-to may change when resuming"
        )
    return saved


def _changed(saved: dict[str, Any], now: dict[str, Any]) -> str:
    diffs = [
        f"{part}.{key}: {saved.get(part, {}).get(key)!r} -> {value!r}"
        for part in ("cycle", "grpo")
        for key, value in now.get(part, {}).items()
        if saved.get(part, {}).get(key) != value
    ]
    return "; ".join(diffs[:3]) or "settings differ"


def _identity(settings: dict[str, Any]) -> dict[str, Any]:
    """Return the settings that must not change on resume (all but cycles and report_to)."""
    parts = {}
    for part in ("cycle", "grpo"):
        renamed = _RENAMED_SINCE.get(part, {})
        removed = _REMOVED_SINCE.get(part, ())
        parts[part] = {
            renamed.get(k, k): v for k, v in settings.get(part, {}).items() if k not in removed
        }
    parts["cycle"].pop("cycles", None)
    parts["cycle"].pop("report_to", None)  # where metrics go changes no result
    for part, added in _ADDED_SINCE.items():
        parts[part] = {**added, **parts[part]}
    return parts


def saved_cycle_config(files: RunFiles) -> CycleConfig | None:
    """Return the :class:`CycleConfig` a run saved (None: it has no ``config.json``).

    Settings the run predates take the value runs without them had; renamed ones are read under
    their current name, and ones since removed are left out.
    """
    if not files.config_path.is_file():
        return None
    saved = files.load_config().get("cycle", {})
    renamed = _RENAMED_SINCE.get("cycle", {})
    values = {**_ADDED_SINCE.get("cycle", {}), **{renamed.get(k, k): v for k, v in saved.items()}}
    known = {f.name for f in fields(CycleConfig)}
    return CycleConfig(**{k: v for k, v in values.items() if k in known})
