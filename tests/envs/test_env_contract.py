"""The TextEnv contract, checked the same way on every built-in environment.

Shapes and types, REQUIRED_INFO_KEYS, JSON-able infos, invalid text as a free no-op, the turn
limit, seeds, reset options by split/index and by id, and errors for misuse. Each environment's
own tests cover what only it does.
"""

from __future__ import annotations

import importlib
import json
import random

import pytest

import envs
from envs.base import REQUIRED_INFO_KEYS, TextEnv
from envs.registry import BUILTIN_SPECS
from skillrl_core.errors import ConfigError, EnvStateError

ENV_IDS = sorted(importlib.import_module(name).SPEC.env_id for name in BUILTIN_SPECS)
"""The built-in environments, named outright: what other tests register (the documented
"counter" example, which keeps only the minimal contract) never joins the list."""
NOT_AN_ACTION = "%% certainly not an action %%"


def check_info(info):
    for key in REQUIRED_INFO_KEYS:
        assert key in info, key
    assert isinstance(info["available_actions"], list)
    assert all(isinstance(a, str) for a in info["available_actions"])
    assert isinstance(info["action_valid"], bool)
    assert isinstance(info["success"], bool)
    for key in ("instruction", "category", "goal_id"):
        assert isinstance(info[key], str) and info[key], key
    json.dumps(info)  # records store it


def test_both_built_in_environments_are_registered():
    assert {"webshop", "sokoban"} <= set(ENV_IDS) <= set(envs.registered())


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_random_play_keeps_the_contract(env_id):
    env = envs.make(env_id)
    assert isinstance(env, TextEnv) and env.env_id == env_id
    rng = random.Random(0)
    for episode in range(5):
        obs, info = env.reset(seed=episode)
        assert isinstance(obs, str) and obs
        check_info(info)
        assert info["action_valid"] is True and info["success"] is False
        terminated = truncated = False
        while not (terminated or truncated):
            action = rng.choice(info["available_actions"])
            obs, reward, terminated, truncated, info = env.step(action)
            assert isinstance(obs, str) and isinstance(reward, float)
            assert isinstance(terminated, bool) and isinstance(truncated, bool)
            check_info(info)
        assert not (terminated and truncated)
        assert info["available_actions"] == []
        assert info["success"] is False or terminated
        after = env.step(info["available_actions"][0] if info["available_actions"] else "up")
        assert after[1] == 0.0 and after[4]["action_valid"] is False
        assert (after[2], after[3]) == (terminated, truncated)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_unparsable_text_is_a_free_no_op(env_id):
    env = envs.make(env_id)
    obs, _ = env.reset(options={"split": "test", "goal_index": 1})
    for action in (NOT_AN_ACTION, "", None):
        new_obs, reward, terminated, truncated, info = env.step(action)  # type: ignore[arg-type]
        assert (new_obs, reward, terminated, truncated) == (obs, 0.0, False, False)
        assert info["action_valid"] is False


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_turn_limit_truncates(env_id):
    env = envs.make(env_id, max_turns=3)
    env.reset(options={"split": "test", "goal_index": 0})
    results = [env.step(NOT_AN_ACTION) for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert not any(r[2] for r in results) and results[-1][4]["success"] is False


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_start(env_id):
    first, second = envs.make(env_id), envs.make(env_id)
    for seed in (1, 2):
        assert first.reset(seed=seed) == second.reset(seed=seed)
    assert len({first.reset(seed=s)[1]["goal_id"] for s in range(20)}) > 10


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_goals_by_split_index_and_by_id(env_id):
    env = envs.make(env_id)
    obs, info = env.reset(options={"split": "eval", "goal_index": 7})
    assert info["split"] == "eval"
    again_obs, again = env.reset(options={"goal_id": info["goal_id"]})
    assert again_obs == obs and again["goal_id"] == info["goal_id"] and again["split"] == "eval"


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize(
    "options",
    [{"split": "dev"}, {"split": "test", "goal_index": 10**6}, {"goal_id": "nope"}, {"goal": 3}],
)
def test_bad_reset_options_raise_config_errors(env_id, options):
    with pytest.raises(ConfigError):
        envs.make(env_id).reset(options=options)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step_before_reset_is_a_clear_error(env_id):
    with pytest.raises(EnvStateError, match="reset"):
        envs.make(env_id).step(NOT_AN_ACTION)
