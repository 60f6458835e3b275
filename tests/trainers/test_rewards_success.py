"""``--reward success``: an episode earns 1 on its last turn when it succeeded, else 0."""

from __future__ import annotations

import pytest

from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord, TurnRecord
from trainers.common.settings_migration import MIGRATIONS
from trainers.cycle.config import CycleConfig
from trainers.cycle.rewards import (
    EnvReward,
    SuccessReward,
    compute_turn_rewards,
    default_reward_functions,
)


def episode(rewards: list[float], success: bool) -> EpisodeRecord:
    turns = [
        TurnRecord(turn=t, observation=str(t), available_actions=[], action="a",
                   action_valid=True, reward=r)
        for t, r in enumerate(rewards)
    ]  # fmt: skip
    return EpisodeRecord(env_id="webshop", goal_id="g", instruction="", category="",
                         turns=turns, success=success)  # fmt: skip


def test_a_near_miss_earns_its_score_from_the_environment_and_nothing_as_a_success():
    near_miss, won, empty = (
        episode([0.0, 0.8], False),
        episode([0.0, 0.0, 1.0], True),
        episode([], False),
    )
    assert EnvReward()([near_miss, won]) == [[0.0, 0.8], [0.0, 0.0, 1.0]]
    assert SuccessReward()([near_miss, won, empty]) == [[0.0, 0.0], [0.0, 0.0, 1.0], []]


def test_the_shaping_terms_are_added_to_either_reward():
    won = episode([0.0, 1.0], True)
    success = compute_turn_rewards([won], default_reward_functions(0.1, 0.01, reward="success"))
    assert success == [[pytest.approx(-0.01), pytest.approx(0.99)]]
    with pytest.raises(ConfigError, match="reward .'score'. must be one of env, success"):
        default_reward_functions(reward="score")


def test_the_run_setting_is_checked_and_an_older_run_keeps_the_environment_reward():
    assert CycleConfig(reward="success").reward == "success"
    with pytest.raises(ConfigError, match="reward"):
        CycleConfig(reward="score")
    assert MIGRATIONS["cycle"].read({"cycles": 2})["reward"] == "env"


def test_a_training_run_pays_the_reward_its_config_names(tmp_path):
    from tiny_checkpoint import write_tiny_checkpoint

    from skillrl.policies import PolicyConfig
    from skillrl.policies.transformers_backend import TransformersPolicy
    from trainers.common.policy_rollouts import PolicyRollouts
    from trainers.cycle.cycle import TrainingRun
    from trainers.update.config import GRPOConfig

    folder = write_tiny_checkpoint(tmp_path / "model", layers=1)
    policy = TransformersPolicy.load(
        PolicyConfig(backend="transformers", model=str(folder), dtype="float32")
    )
    runner = PolicyRollouts(policy, max_turns=2, max_new_tokens=4)
    for reward, kind in (("env", EnvReward), ("success", SuccessReward)):
        config = CycleConfig(cycles=1, eval_goals=1, validation_goals=0, skills=False,
                             distill=False, evolve=False, reward=reward)  # fmt: skip
        run = TrainingRun(config, GRPOConfig(), policy=policy, runner=runner,
                          run_dir=tmp_path / reward)  # fmt: skip
        assert isinstance(run.rewards[0], kind)
