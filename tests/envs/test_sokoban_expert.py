"""The scripted Sokoban expert: solves every test room within the turn limit, and recovers."""

from __future__ import annotations

import random

import pytest

import envs
from envs.sokoban.expert import SokobanExpert


def _run(env, expert, obs, info):
    moves = 0
    while True:
        obs, _, terminated, truncated, info = env.step(expert.act(obs, info))
        moves += 1
        if terminated or truncated:
            return info, moves


@pytest.mark.parametrize("category", ["6x6-1box", "7x7-2box", "8x8-3box"])
def test_expert_solves_every_test_room_optimally_within_the_turn_limit(category):
    env = envs.make("sokoban", categories=category)
    for index in range(env.levels.split_size("test")):
        obs, info = env.reset(options={"split": "test", "goal_index": index})
        expert = SokobanExpert()
        expert.reset(info)
        final, moves = _run(env, expert, obs, info)
        assert final["success"], (category, index)
        assert moves == info["goal"]["optimal_moves"] <= env.config.max_turns
        assert expert.solves == 1  # the cached plan was followed to the end


def test_expert_recovers_from_a_learners_detour():
    env = envs.make("sokoban")
    rng = random.Random(0)
    recovered = 0
    for index in range(30):
        obs, info = env.reset(options={"split": "test", "goal_index": index})
        expert = SokobanExpert()
        expert.reset(info)
        expert.act(obs, info)  # the expert plans, then a learner plays three random moves
        # Drawn up front: a detour that ends the episode (a corner deadlock) takes as many
        # draws as one that does not, so every room gets the same detour whatever came before.
        detour = [rng.choice(info["available_actions"]) for _ in range(3)]
        for move in detour:
            obs, _, terminated, _, info = env.step(move)
            if terminated:
                break
        if terminated or info["reward_breakdown"]["stuck_boxes"]:
            continue  # solved by chance, or the learner deadlocked the room
        solves_before = expert.solves
        final, _ = _run(env, expert, obs, info)
        assert final["success"], index
        # One re-plan from the detour, none if the learner happened to land on the plan.
        assert expert.solves - solves_before in (0, 1)
        recovered += expert.solves - solves_before
    assert recovered >= 20


def test_expert_plays_on_from_a_deadlocked_room_without_failing():
    env = envs.make("sokoban", max_turns=6)
    obs, info = env.reset(options={"room": "#######\n#X____#\n#__P_O#\n#######"})
    expert = SokobanExpert()
    expert.reset(info)
    final, moves = _run(env, expert, obs, info)
    assert moves == 6 and not final["success"]
    assert final["reward_breakdown"]["valid"] and final["action_valid"]
    assert expert.solves == 6  # no plan exists, so it tries again each turn


def test_expert_declines_to_label_a_deadlocked_room_and_labels_a_solvable_one():
    solvable = "######\n#P___#\n#_X__#\n#___##\n#___O#\n######\n"
    # The box against the top wall, its target on the bottom row: no push brings it back.
    deadlocked = "######\n#_XP_#\n#____#\n#___##\n#___O#\n######\n"
    expert = SokobanExpert()
    expert.reset({})
    assert expert.label(solvable, {}) in ("up", "down", "left", "right")
    expert.reset({})
    assert expert.label(deadlocked, {}) is None
    assert expert.act(deadlocked, {}) in ("down", "right")  # act still plays an unblocked move
    assert expert.label("no grid here", {}) is None
