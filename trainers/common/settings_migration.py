"""The one migration table of saved run settings, and the field-by-field resume comparison.

Both trainers (the improvement cycle's ``config.json`` and the cold start's) read a saved
section through its entry in :data:`MIGRATIONS` and compare it with today's settings through
:func:`changed_settings`, so a renamed or added field is written down once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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
    # compare_starting_bank replayed its evaluation with the cycle-0 bank; before
    # rollout_parallel every rollout played 16 episodes at once, and before reward every
    # episode earned the environment's reward.
    # Before grpo.lora_layers a LoRA update adapted every layer.
    # cycle.train_temperature is grpo.temperature, which runs saved beside it with its value.
    "cycle": Migration(
        added={
            "eval_every": 1,
            "rollout_dtype": "float32",
            "sensitivity": False,
            "patience": 0,
            "test_goals": 0,
            "compare_starting_bank": False,
            "rollout_parallel": 16,
            "reward": "env",
        },
        removed=("train_temperature",),
    ),
    "grpo": Migration(
        added={
            "whole_group_steps": False,
            "estimator": "grpo",
            "rft_weight": 0.0,
            "bf16": False,
            "lora_layers": None,
        },
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
    # The cold start's config.json (trainers.cold_start.cold_start): no field added or renamed yet.
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
