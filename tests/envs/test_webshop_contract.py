"""A check_env-style contract test: shapes, types, invalid actions, limits, determinism."""

from __future__ import annotations

import json
import random

import pytest

import envs
from envs.base import REQUIRED_INFO_KEYS


def _check_info(info):
    for key in REQUIRED_INFO_KEYS:
        assert key in info, key
    assert isinstance(info["available_actions"], list)
    assert all(isinstance(a, str) for a in info["available_actions"])
    assert isinstance(info["action_valid"], bool)
    assert isinstance(info["success"], bool)
    assert isinstance(info["instruction"], str) and info["instruction"]
    assert isinstance(info["category"], str) and info["category"]
    assert isinstance(info["goal_id"], str) and info["goal_id"]
    json.dumps(info)  # JSON-able, so that records can store it


@pytest.mark.parametrize("mode", ["text", "text_rich"])
def test_random_play_keeps_the_contract(mode):
    env = envs.make("webshop", observation_mode=mode)
    rng = random.Random(0)
    for episode in range(15):
        obs, info = env.reset(seed=episode)
        assert isinstance(obs, str) and info["instruction"] in obs
        _check_info(info)
        assert info["action_valid"] is True
        for _ in range(30):
            actions = info["available_actions"]
            action = rng.choice(actions) if actions else "click[buy now]"
            if action == "search[<query>]":
                action = f"search[{rng.choice(['shirt', 'tea', 'black chair', 'zzzz'])}]"
            obs, reward, terminated, truncated, info = env.step(action)
            assert isinstance(obs, str)
            assert isinstance(reward, float) and 0.0 <= reward <= 1.0
            assert isinstance(terminated, bool) and isinstance(truncated, bool)
            _check_info(info)
            if terminated or truncated:
                assert not (terminated and truncated)
                assert info["available_actions"] == []
                break
        if terminated:
            assert "reward_breakdown" in info
            assert info["success"] == (info["reward_breakdown"]["reward"] == 1.0)
        else:
            assert info["success"] is False


INVALID_ON_SEARCH_PAGE = [
    "",
    "search[]",
    "search",
    "Search[shirt]",
    "click[search]",
    "click[buy now]",
    "click[back to search]",
    "buy now",
    "click[]",
    "find[shirt]",
]


@pytest.mark.parametrize("action", INVALID_ON_SEARCH_PAGE)
def test_invalid_actions_on_the_search_page_are_no_ops(webshop, action):
    obs, _ = webshop.reset(options={"split": "test", "goal_index": 3})
    new_obs, reward, terminated, truncated, info = webshop.step(action)
    assert (new_obs, reward, terminated, truncated) == (obs, 0.0, False, False)
    assert info["action_valid"] is False
    assert info["page"] == "search"


@pytest.mark.parametrize(
    "action", ["search[tea]", "click[< prev]", "click[description]", "click[b000000000]", "noop"]
)
def test_invalid_actions_on_the_results_page_are_no_ops(webshop, action):
    webshop.reset(options={"split": "test", "goal_index": 3})
    obs, *_ = webshop.step("search[organic tea]")
    new_obs, reward, terminated, truncated, info = webshop.step(action)
    assert (new_obs, reward, terminated, truncated) == (obs, 0.0, False, False)
    assert info["action_valid"] is False and info["page"] == "results"


def test_non_string_action_is_invalid_not_an_exception(webshop):
    webshop.reset(options={"split": "test", "goal_index": 0})
    _, reward, terminated, _, info = webshop.step(None)  # type: ignore[arg-type]
    assert reward == 0.0 and not terminated and info["action_valid"] is False


def test_turn_limit_truncates():
    env = envs.make("webshop", max_turns=3)
    env.reset(options={"split": "test", "goal_index": 0})
    results = [env.step("click[nothing]") for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert all(r[2] is False for r in results)
    assert results[-1][4]["success"] is False
    obs, reward, terminated, truncated, info = env.step("search[tea]")
    assert (reward, terminated, truncated, info["action_valid"]) == (0.0, False, True, False)


def test_same_seed_same_goal_and_observations():
    first, second = envs.make("webshop"), envs.make("webshop")
    for seed in (1, 2, 3):
        obs_a, info_a = first.reset(seed=seed)
        obs_b, info_b = second.reset(seed=seed)
        assert (obs_a, info_a) == (obs_b, info_b)
        assert info_a["split"] == "train"
        step_a = first.step("search[dress shirt black]")
        step_b = second.step("search[dress shirt black]")
        assert step_a == step_b
    goals = {first.reset(seed=s)[1]["goal_id"] for s in range(20)}
    assert len(goals) > 10


def test_options_pick_goals_by_split_index_and_id(webshop):
    _, info = webshop.reset(options={"split": "eval", "goal_index": 7})
    assert info["split"] == "eval" and info["goal_index"] == 507
    _, again = webshop.reset(options={"goal_id": info["goal_id"]})
    assert again["goal_id"] == info["goal_id"] and again["split"] == "eval"
    _, test_goal = webshop.reset(options={"split": "test", "goal_index": 499})
    assert test_goal["goal_index"] == 499


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"split": "dev"}, "split"),
        ({"split": "test", "goal_index": 500}, "goal_index"),
        ({"goal_id": "nope"}, "nope"),
        ({"goal": 3}, "unknown reset option"),
    ],
)
def test_bad_reset_options_raise_clear_errors(webshop, options, message):
    with pytest.raises(ValueError, match=message):
        webshop.reset(options=options)


def test_many_envs_share_one_catalog_and_index():
    a, b = envs.make("webshop"), envs.make("webshop", max_turns=5)
    assert a.world is b.world
    assert envs.make("webshop", data_seed=1).world is not a.world


def test_step_before_reset_is_a_clear_error():
    import envs
    from skillrl_core.errors import EnvStateError

    env = envs.make("webshop")
    with pytest.raises(EnvStateError, match="reset"):
        env.step("search[shoes]")
