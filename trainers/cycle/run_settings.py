"""What a training run's ``config.json`` holds, and the check that a resume keeps it.

``config.json`` is the one file of a run's settings: the :class:`CycleConfig` and
:class:`GRPOConfig` it runs with (compared on ``--resume``) and, when the run was launched by a
command, that command's resolved options (``options``: option name -> plain value), which
``skillrl train --resume`` and ``--config <run>/config.json`` read back. Cheap (JSON only, no
torch): the CLI checks a ``--resume`` before it loads a model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any, TypeVar

from skillrl_core.errors import CheckpointError
from trainers.common.settings_migration import MIGRATIONS, changed_settings
from trainers.cycle.config import CycleConfig
from trainers.cycle.run_files import RunFiles, RunState
from trainers.update.config import GRPOConfig

_Config = TypeVar("_Config", CycleConfig, GRPOConfig)


RESUMABLE_CYCLE = ("cycles", "report_to", "merged_checkpoints")
"""Cycle settings a resume may change: how many cycles, where metrics go, how checkpoints are
written (none changes what a cycle trains)."""
RESUMABLE_OPTIONS = frozenset(name.replace("_", "-") for name in RESUMABLE_CYCLE)
"""Launch options a resume may change (every other one shapes what the run trains; how a
checkpoint is written does not)."""
RESUMABLE_WORDS = "only --cycles, --report-to and --merged-checkpoints may change"
"""What a refused resume says may change."""
LOCATING_OPTIONS = frozenset({"run-name", "threads", "base-url"})
"""Launch options that say where the run is and where it runs (its folder, CPU threads, the
rollout server's address), not what it trains: never compared."""
OPTIONS_DIGEST = "options_digest"
"""Key of the digest of ``options`` in ``config.json``: a hand edit of them shows."""


def options_digest(options: Mapping[str, Any]) -> str:
    """SHA-256 of the launch options that shape the run (canonical JSON)."""
    shaping = {k: v for k, v in options.items() if k not in RESUMABLE_OPTIONS | LOCATING_OPTIONS}
    text = json.dumps(shaping, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def run_settings(
    config: CycleConfig, grpo: GRPOConfig, options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return what a run's ``config.json`` holds (``options`` and their digest only when given)."""
    settings: dict[str, Any] = {"cycle": asdict(config), "grpo": asdict(grpo)}
    if options is not None:
        settings["options"] = dict(options)
        settings[OPTIONS_DIGEST] = options_digest(options)
    return settings


def saved_options(files: RunFiles) -> dict[str, Any] | None:
    """Return the launch options a run's ``config.json`` saved, under today's names (None: none)."""
    if not files.config_path.is_file():
        return None
    options = files.load_config().get("options")
    return MIGRATIONS["options"].read(options) if isinstance(options, dict) else None


def check_resume_settings(
    files: RunFiles,
    config: CycleConfig,
    grpo: GRPOConfig,
    options: Mapping[str, Any] | None = None,
    sources: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Raise CheckpointError unless the run in ``files`` was started with these settings.

    Only ``cycles``, ``report_to`` (where metrics go) and ``merged_checkpoints`` may differ.
    Compared: the launch ``options`` against the ones the run saved (every one that shapes the
    run: prompt budget, decoding, model, backend, init, env options, skills, ...), the saved
    options against their digest (a hand edit of ``config.json``), and the cycle and GRPO
    configs. The refusal names the setting, both values and where each came from (``sources``:
    option -> "the command line", ...). Returns what ``config.json`` holds.
    Cheap (one JSON read): the CLI calls it before loading a model.
    """
    saved = files.load_config()
    where = files.config_path
    saved_options = saved.get("options")
    digest = saved.get(OPTIONS_DIGEST)
    # Options without their digest are refused too: deleting or nulling the digest must not
    # let hand-edited options (the prompt budget, decoding: in no other section) through.
    if isinstance(saved_options, dict) and digest != options_digest(saved_options):
        why = (
            "were edited after the run saved them (they no longer match its options_digest)"
            if isinstance(digest, str)
            else "have no options_digest (deleted, nulled, or saved by an older skillrl)"
        )
        raise CheckpointError(
            f"the options in {where} {why}, so they may not be what the run trained under; put "
            "them back, or start a new run (another --run-name; --init <its last checkpoint>)"
        )
    if isinstance(saved_options, dict) and options is not None:
        saved_options = MIGRATIONS["options"].read(saved_options)
        for key in sorted(set(saved_options) | set(options)):
            if key in RESUMABLE_OPTIONS | LOCATING_OPTIONS or key not in saved_options:
                continue
            if options.get(key) != saved_options[key]:
                source = (sources or {}).get(key, "this resume")
                raise CheckpointError(
                    f"--resume would change {key} from {saved_options[key]!r} (saved in {where}) "
                    f"to {options.get(key)!r} (from {source}): {RESUMABLE_WORDS} when "
                    "resuming; start a new run (another --run-name) to change it"
                )
    changed = changed_settings(
        saved, run_settings(config, grpo), ("cycle", "grpo"), {"cycle": RESUMABLE_CYCLE}
    )
    if changed:
        raise CheckpointError(
            f"--resume with different settings than {where} ({'; '.join(changed[:3])}; left: "
            "its cycle/grpo "
            "sections, right: what the options on the command line and in its options block "
            f"give): {RESUMABLE_WORDS} when resuming"
        )
    return saved


def check_saved_cycle(files: RunFiles, state: RunState) -> None:
    """Refuse a ``state.json`` whose cycle lies beyond the cycles the run's ``config.json`` saved.

    A run of ``cycles`` cycles is at most at cycle ``cycles + 1`` (all done); a larger one is a
    damaged or hand-edited state that a resume would report as done without training.
    """
    cycles = files.load_config().get("cycle", {}).get("cycles")
    if isinstance(cycles, int) and state.cycle > cycles + 1:
        raise CheckpointError(
            f"{files.state_path} is damaged: its cycle ({state.cycle}) is beyond the run's "
            f"{cycles} cycles (saved in {files.config_path}); start a new run (another --run-name)"
        )


def saved_cycle_config(files: RunFiles) -> CycleConfig | None:
    """Return the :class:`CycleConfig` a run saved (None: it has no ``config.json``).

    Settings the run predates take the value runs without them had; renamed ones are read under
    their current name, and ones since removed are left out.
    """
    return _saved_part(files, "cycle", CycleConfig)


def saved_grpo_config(files: RunFiles) -> GRPOConfig | None:
    """Return the :class:`GRPOConfig` a run saved (None: it has no ``config.json``).

    Read as :func:`saved_cycle_config` reads the cycle's: a run saved before ``estimator``
    trained plain GRPO advantages.
    """
    return _saved_part(files, "grpo", GRPOConfig)


def _saved_part(files: RunFiles, part: str, kind: type[_Config]) -> _Config | None:
    if not files.config_path.is_file():
        return None
    values = MIGRATIONS[part].read(files.load_config().get(part, {}))
    known = {f.name for f in fields(kind)}
    return kind(**{k: v for k, v in values.items() if k in known})
