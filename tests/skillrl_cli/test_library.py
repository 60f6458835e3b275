"""The library under ``skillrl train`` and ``eval``: a script trains and evaluates without click.

The documented toy environment (``tests/envs/toy_env.py``) over a tiny real checkpoint: one
improvement cycle, progress through the typed run events and the library's watch, and an
evaluation of the checkpoint it saved.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_checkpoint import write_tiny_checkpoint

from skillrl.policies import PolicyConfig
from skillrl_cli.library import (
    EvalSettings,
    EvalWatch,
    TrainSettings,
    TrainWatch,
    evaluate_model,
    train,
    training_policy_config,
)
from skillrl_core.errors import ConfigError
from skillrl_core.goal_range import GoalRange
from trainers.common.phased_run import PhaseEnded, PhaseStarted, RunEvents
from trainers.cycle.config import CycleConfig
from trainers.evaluate import EvalConfig
from trainers.update.config import GRPOConfig

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "envs"))  # the documented toy environment


def test_the_library_imports_neither_click_nor_rich():
    probe = "import sys, skillrl_cli.library; print(sorted({'click', 'rich'} & set(sys.modules)))"
    found = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "[]"


@pytest.mark.slow  # about 10 s: a tiny model loads, plays 8 episodes and takes one update
def test_train_runs_a_cycle_of_the_toy_environment_without_click(tmp_path, monkeypatch):
    from trainers.common import policy_rollouts

    importlib.reload(importlib.import_module("toy_env"))  # registers "counter" for this test
    made = policy_rollouts.PolicyRollouts
    parallel = []  # what each runner train builds is told to play at once

    def runner(*args, **kwargs):
        parallel.append(kwargs.get("max_parallel"))
        return made(*args, **kwargs)

    monkeypatch.setattr(policy_rollouts, "PolicyRollouts", runner)
    model = write_tiny_checkpoint(tmp_path / "model")
    workspace = tmp_path / "ws"
    settings = TrainSettings(
        cycle=CycleConfig(
            env_id="counter",
            cycles=1,
            goals_per_cycle=2,
            group_size=2,
            eval_goals=2,
            max_turns=3,
            max_new_tokens=4,
            skills=False,
            max_topup_rounds=0,
            rollout_parallel=3,
        ),
        grpo=GRPOConfig(per_device_train_batch_size=4, gradient_accumulation_steps=1),
        policy=training_policy_config(str(model), workspace, threads=1),
        folder=workspace / "runs" / "counter",
    )
    started, ended, saved, rollouts = [], [], [], []
    events = (
        RunEvents()
        .on(PhaseStarted, lambda e: started.append((e.index, str(e.phase))))
        .on(PhaseEnded, lambda e: ended.append((e.index, str(e.phase))))
    )
    watch = TrainWatch(rollout=rollouts.append, cycle_saved=saved.append)

    result = train(settings, events=events, watch=watch)

    assert result.folder == settings.folder and result.state.done
    assert parallel == [3]  # --rollout-parallel reaches the run's one runner
    assert [row["cycle"] for row in result.history] == [0, 1]
    assert result.history[1]["train.episodes"] == 4 and result.history[1]["eval.episodes"] == 2
    assert started == ended and ended[:2] == [(0, "eval"), (0, "save")]
    assert (1, "rollout") in ended and (1, "update") in ended and ended[-1] == (1, "save")
    assert [m.cycle for m in saved] == [0, 1]  # one typed record per saved cycle
    assert saved[1].to_row() == result.history[1]
    assert rollouts and rollouts[-1].episodes_done == rollouts[-1].episodes
    assert (settings.folder / "checkpoints" / "cycle-0001" / "model.safetensors").exists()
    assert result.files.metrics_path.read_text().count("\n") == 2

    # The checkpoint it saved, evaluated as `skillrl eval --skills off --goals 3` would.
    evaluated = EvalSettings(
        policy=PolicyConfig(
            model=str(settings.folder / "checkpoints" / "cycle-0001"),
            dtype="float32",
            workspace=workspace,
            threads=1,
        ),
        config=EvalConfig(goals=GoalRange.first_n(3), ts=(3,)),
        env_id="counter",
        arms=("off",),
        max_turns=3,
        max_new_tokens=4,
    )
    arms = []
    report = evaluate_model(evaluated, watch=EvalWatch(arm_started=arms.append))
    assert arms == ["off"] and [r.arm for r in report.arms] == ["off"]
    assert report.arms[0].greedy.episodes == 3 and len(report.arms[0].outcomes) == 3
    assert report.comparisons == [] and report.to_dict()["arms"][0]["arm"] == "off"


def test_evaluation_settings_refuse_an_unknown_arm_before_a_model_loads():
    with pytest.raises(ConfigError, match="arms"):
        EvalSettings(policy=PolicyConfig(), config=EvalConfig(), arms=("on", "sometimes"))


def test_a_placebo_arm_without_another_task_is_refused_before_the_model_loads(tmp_path):
    settings = EvalSettings(
        policy=PolicyConfig(model=str(tmp_path / "no-such-model"), workspace=tmp_path / "ws"),
        config=EvalConfig(goals=GoalRange(0, 1)),
        env_id="sokoban",
        env_config={"categories": "6x6-1box"},  # one instruction, one category
        arms=("on", "placebo"),
    )
    with pytest.raises(ConfigError, match="differ in instruction or category"):
        evaluate_model(settings)
    assert not (tmp_path / "ws").exists()  # nothing opened, nothing written


def test_a_training_run_on_one_task_goes_on_without_the_sensitivity_figure(caplog):
    from types import SimpleNamespace

    from trainers.cycle.cycle import TrainingRun

    run = SimpleNamespace(
        config=CycleConfig(sensitivity=True),
        bank=object(),
        eval_runner=SimpleNamespace(
            env_id="sokoban", env_config={"categories": "6x6-1box"}, bank=object()
        ),
        _placebo=None,
        _no_placebo=False,
    )
    with caplog.at_level("WARNING"):
        assert TrainingRun._sensitivity_probe(run) is None
        assert TrainingRun._sensitivity_probe(run) is None  # asked again: still none, said once
    assert run._no_placebo and caplog.text.count("no skill sensitivity") == 1
