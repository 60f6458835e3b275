"""What a training run's ``config.json`` holds, and the check that a resume keeps it.

Cheap (JSON only, no torch): the CLI checks a ``--resume`` before it loads a model.
"""

from __future__ import annotations

from dataclasses import asdict
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


def run_settings(config: CycleConfig, grpo: GRPOConfig) -> dict[str, Any]:
    """Return what a run's ``config.json`` holds."""
    return {"cycle": asdict(config), "grpo": asdict(grpo)}


def check_resume_settings(files: RunFiles, config: CycleConfig, grpo: GRPOConfig) -> None:
    """Raise CheckpointError unless the run in ``files`` was started with these settings.

    Only ``cycles`` may differ. Cheap (two JSON reads): the CLI calls it before loading a model.
    """
    saved = files.load_config()
    if _identity(saved) != _identity(run_settings(config, grpo)):
        changed = _changed(_identity(saved), _identity(run_settings(config, grpo)))
        raise CheckpointError(
            f"--resume with different settings than {files.config_path} ({changed}): "
            "only --cycles may change when resuming"
        )


def _changed(saved: dict[str, Any], now: dict[str, Any]) -> str:
    diffs = [
        f"{part}.{key}: {saved.get(part, {}).get(key)!r} -> {value!r}"
        for part in ("cycle", "grpo")
        for key, value in now.get(part, {}).items()
        if saved.get(part, {}).get(key) != value
    ]
    return "; ".join(diffs[:3]) or "settings differ"


def _identity(settings: dict[str, Any]) -> dict[str, Any]:
    """Return the settings that must not change on resume (everything but the cycle count)."""
    parts = {}
    for part in ("cycle", "grpo"):
        renamed = _RENAMED_SINCE.get(part, {})
        removed = _REMOVED_SINCE.get(part, ())
        parts[part] = {
            renamed.get(k, k): v for k, v in settings.get(part, {}).items() if k not in removed
        }
    parts["cycle"].pop("cycles", None)
    for part, added in _ADDED_SINCE.items():
        parts[part] = {**added, **parts[part]}
    return parts
