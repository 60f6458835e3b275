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
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from skillrl_core.errors import CheckpointError
from trainers.config import CycleConfig, GRPOConfig
from trainers.run_files import RunFiles, RunState

_Config = TypeVar("_Config", CycleConfig, GRPOConfig)


@dataclass(frozen=True)
class Migration:
    """How one section of a saved settings file reads under today's field names."""

    added: Mapping[str, Any] = field(default_factory=dict)
    """Fields added since runs could be saved, with the value a run saved without them had."""
    renamed: Mapping[str, str] = field(default_factory=dict)
    """Fields saved under an older name: old name -> today's."""
    removed: tuple[str, ...] = ()
    """Fields that are now another setting: left out."""

    def read(self, saved: Mapping[str, Any]) -> dict[str, Any]:
        """Return ``saved`` under today's names, with each field it predates at its old value."""
        today = {self.renamed.get(k, k): v for k, v in saved.items() if k not in self.removed}
        return {**self.added, **today}


MIGRATIONS: dict[str, Migration] = {
    # A run saved before whole_group_steps shuffled turns across groups (it resumes with
    # --shuffled-turns); before eval_every it evaluated every cycle; before estimator it trained
    # plain GRPO advantages; before rollout_dtype it rolled out in float32, and before bf16 it
    # updated in float32; none saved before sensitivity probed its evaluation, nor before
    # patience and test_goals stopped early or played test goals, nor before
    # compare_starting_bank replayed its evaluation with the cycle-0 bank.
    # cycle.train_temperature is grpo.temperature, which runs saved beside it with its value.
    "cycle": Migration(
        added={
            "eval_every": 1,
            "rollout_dtype": "float32",
            "sensitivity": False,
            "patience": 0,
            "test_goals": 0,
            "compare_starting_bank": False,
        },
        removed=("train_temperature",),
    ),
    "grpo": Migration(
        added={"whole_group_steps": False, "estimator": "grpo", "rft_weight": 0.0, "bf16": False},
        renamed={"step_advantage_weight": "step_weight"},
    ),
    # Launch options saved under their names before each took its config field's name.
    "options": Migration(
        renamed={
            "env": "env-id",
            "batch-size": "per-device-train-batch-size",
            "grad-accum": "gradient-accumulation-steps",
            "whole-groups": "whole-group-steps",
            "lora": "use-peft",
            "invalid-penalty": "invalid-action-penalty",
            "init": "init-checkpoint",
            "dagger-rounds": "cold-start-dagger-rounds",
            "dagger-goals": "cold-start-dagger-goals",
            "dagger-keep": "cold-start-dagger-keep",
            "dagger-replay": "cold-start-dagger-replay",
            "sft-lora-layers": "cold-start-lora-layers",
            "sft-epochs": "cold-start-num-train-epochs",
            "sft-learning-rate": "cold-start-learning-rate",
        }
    ),
    # The cold start's config.json (trainers.cold_start): no field added or renamed yet.
    "cold_start": Migration(),
    "prompt": Migration(),
}
"""The one table of what changed in saved settings, by section of ``config.json``: every
reader of a saved run (resume checks, ``saved_cycle_config``, ``--resume``'s options) reads a
section through its entry here."""


def changed_settings(
    saved: Mapping[str, Any],
    now: Mapping[str, Any],
    sections: tuple[str, ...],
    resumable: Mapping[str, tuple[str, ...]],
) -> list[str]:
    """Compare saved settings with today's field by field: ``section.field: saved -> now`` each.

    ``saved`` is read through :data:`MIGRATIONS`; ``resumable`` names, per section, the fields
    a resume may change. Both sides are compared as JSON holds them (a tuple as a list).
    """
    before, after = json.loads(json.dumps(dict(saved))), json.loads(json.dumps(dict(now)))
    diffs = []
    for section in sections:
        old = MIGRATIONS[section].read(before.get(section) or {})
        new = after.get(section) or {}
        for key in [*new, *(k for k in old if k not in new)]:
            if key not in resumable.get(section, ()) and old.get(key) != new.get(key):
                diffs.append(f"{section}.{key}: {old.get(key)!r} -> {new.get(key)!r}")
    return diffs


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
