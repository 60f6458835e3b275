"""The one migration table of saved settings, and the resume check both trainers use."""

from __future__ import annotations

from dataclasses import asdict

from trainers.cold_start.sft_config import ColdStartConfig
from trainers.common.settings_migration import MIGRATIONS, changed_settings
from trainers.cycle.config import CycleConfig
from trainers.cycle.run_settings import run_settings
from trainers.update.config import GRPOConfig


def test_an_old_run_reads_as_today_through_the_one_table():
    saved = run_settings(CycleConfig(), GRPOConfig())
    saved["grpo"]["step_advantage_weight"] = saved["grpo"].pop("step_weight")  # an older name
    for added, old in MIGRATIONS["cycle"].added.items():  # settings it predates
        if saved["cycle"][added] == old:  # ran as today's default: the same run
            saved["cycle"].pop(added)
    saved["cycle"]["train_temperature"] = 1.0  # since removed
    before_sensitivity = run_settings(CycleConfig(sensitivity=False), GRPOConfig())
    before_sensitivity["cycle"].pop("sensitivity")  # ran without its probe
    today = run_settings(CycleConfig(), GRPOConfig())
    assert changed_settings(before_sensitivity, today, ("cycle",), {}) == [
        "cycle.sensitivity: False -> True"
    ]
    assert (
        changed_settings(saved, run_settings(CycleConfig(), GRPOConfig()), ("cycle", "grpo"), {})
        == []
    )
    assert MIGRATIONS["options"].read({"env": "webshop"}) == {"env-id": "webshop"}


def test_the_check_names_each_changed_field_and_spares_the_resumable_ones():
    saved = run_settings(CycleConfig(cycles=2, seed=1), GRPOConfig())
    now = run_settings(CycleConfig(cycles=5, seed=2), GRPOConfig(learning_rate=1e-3))
    resumable = {"cycle": ("cycles",)}
    assert changed_settings(saved, now, ("cycle", "grpo"), resumable) == [
        "cycle.seed: 1 -> 2",
        f"grpo.learning_rate: {GRPOConfig().learning_rate!r} -> 0.001",
    ]


def test_a_cold_start_is_compared_the_same_way():
    saved = {"cold_start": asdict(ColdStartConfig(dagger_rounds=1)), "prompt": {}}
    more_rounds = {"cold_start": asdict(ColdStartConfig(dagger_rounds=3)), "prompt": {}}
    resumable = {"cold_start": ("dagger_rounds",)}
    assert changed_settings(saved, more_rounds, ("cold_start", "prompt"), resumable) == []
    other = {"cold_start": asdict(ColdStartConfig(goals=8)), "prompt": {}}
    assert sorted(changed_settings(saved, other, ("cold_start",), {})) == [
        "cold_start.dagger_rounds: 1 -> 0",
        f"cold_start.goals: {ColdStartConfig().goals} -> 8",
    ]
