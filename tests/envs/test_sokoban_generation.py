"""Sokoban generation: every room solvable, seeds reproducible, splits fixed and disjoint."""

from __future__ import annotations

import random
import time

import pytest

import envs
from envs.sokoban.config import SokobanConfig, parse_category
from envs.sokoban.generate import generate_puzzle
from envs.sokoban.levels import LevelSet, shared_levels
from envs.sokoban.room import DIRECTIONS, apply_move, render_grid
from envs.sokoban.solver import dead_squares, replay
from skillrl_core.errors import ConfigError

CATEGORIES = ("6x6-1box", "7x7-2box", "8x8-3box")


def _fewest_moves(room, start):
    """Breadth-first search over single moves, no pruning: the reference for optimality."""
    frontier, seen, depth = [start], {start}, 0
    while frontier:
        if any(s.solved(room) for s in frontier):
            return depth
        nxt = []
        for state in frontier:
            for direction in DIRECTIONS:
                after = apply_move(room, state, direction).state
                if after not in seen:
                    seen.add(after)
                    nxt.append(after)
        frontier, depth = nxt, depth + 1
    return None


@pytest.mark.parametrize("name", CATEGORIES)
def test_every_generated_room_is_solvable_and_its_optimum_is_recorded(name):
    category = parse_category(name)
    for seed in range(70):  # 210 rooms over the three categories
        puzzle = generate_puzzle(
            random.Random(f"t:{name}:{seed}"),
            category.width,
            category.height,
            category.boxes,
            reverse_steps=100,
            min_moves=2,
            max_moves=15,
        )
        room, start = puzzle.room, puzzle.start
        assert len(start.boxes) == len(room.targets) == category.boxes
        assert not start.boxes & room.targets  # gym-sokoban: every box starts off target
        assert not start.boxes & dead_squares(room)
        assert start.player in room.floor and start.player not in start.boxes
        assert 2 <= puzzle.optimal_moves <= 15
        assert replay(room, start, puzzle.solution).solved(room)
        if category.boxes <= 2:  # small enough for a plain breadth-first search over moves
            assert _fewest_moves(room, start) == puzzle.optimal_moves
        cells = range(room.width * room.height)
        border = [c for c in cells if c // room.width in (0, room.height - 1)]
        border += [c for c in cells if c % room.width in (0, room.width - 1)]
        assert not set(border) & room.floor


def test_generation_is_fast():
    category = parse_category("8x8-3box")
    times = []
    for seed in range(30):
        start = time.perf_counter()
        generate_puzzle(random.Random(seed), 8, 8, category.boxes, reverse_steps=100, max_moves=15)
        times.append(time.perf_counter() - start)
    times.sort()
    assert times[len(times) // 2] < 0.05, times  # a typical (median) room in under 50 ms


def test_same_seed_same_room_and_different_seeds_differ():
    grids = set()
    for seed in range(10):
        a = generate_puzzle(random.Random(seed), 7, 7, 2, reverse_steps=100, max_moves=15)
        b = generate_puzzle(random.Random(seed), 7, 7, 2, reverse_steps=100, max_moves=15)
        assert a == b
        grids.add(render_grid(a.room, a.start))
    assert len(grids) == 10


def test_a_level_set_is_the_same_whatever_order_rooms_are_made_in():
    config = SokobanConfig(rooms_per_category=400)
    forward, backward = LevelSet(config), LevelSet(config)
    positions = [0, 5, 149, 30]
    grids_forward = [forward.level("test", p).puzzle for p in positions]
    grids_backward = [backward.level("test", p).puzzle for p in reversed(positions)]
    assert grids_forward == list(reversed(grids_backward))


def test_splits_are_disjoint_interleaved_and_sized():
    levels = LevelSet(SokobanConfig(rooms_per_category=400))
    assert [levels.split_size(s) for s in ("test", "eval", "train")] == [300, 150, 750]
    ids = {
        split: {levels.level(split, p).goal_id for p in range(0, levels.split_size(split), 7)}
        for split in ("test", "eval", "train")
    }
    assert not ids["test"] & ids["eval"] and not ids["eval"] & ids["train"]
    assert not ids["test"] & ids["train"]
    first = [levels.level("test", p) for p in range(6)]
    assert [lv.category.name for lv in first] == list(CATEGORIES) * 2
    assert [lv.goal_id for lv in first[:3]] == ["6x6-1box-0000", "7x7-2box-0000", "8x8-3box-0000"]
    assert levels.level("eval", 0).goal_id == "6x6-1box-0100"
    assert levels.level("train", 4).goal_id == "7x7-2box-0151"
    assert levels.level("eval", 7).goal_index == 307
    for split in ("test", "eval", "train"):
        level = levels.level(split, 11)
        assert levels.locate(level.goal_id) == (split, 11)


@pytest.mark.parametrize("goal_id", ["6x6-1box-7", "9x9-1box-0001", "6x6-1box-0400", "x", ""])
def test_unknown_goal_ids_are_not_found(goal_id):
    assert LevelSet(SokobanConfig(rooms_per_category=400)).locate(goal_id) is None


def test_envs_share_rooms_per_room_settings_only():
    a = envs.make("sokoban")
    assert a.levels is envs.make("sokoban", max_turns=5, step_penalty=-0.2).levels
    assert a.levels is not envs.make("sokoban", seed=1).levels
    assert shared_levels(SokobanConfig(seed=1)) is envs.make("sokoban", seed=1).levels


def test_changing_the_master_seed_changes_the_rooms():
    a, b = LevelSet(SokobanConfig()), LevelSet(SokobanConfig(seed=1))
    differ = [a.level("test", p).puzzle != b.level("test", p).puzzle for p in range(9)]
    assert sum(differ) >= 8


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"categories": "6x6"}, "category"),
        ({"categories": "4x4-1box"}, "width and height"),
        ({"categories": "6x6-5box"}, "boxes"),
        ({"categories": ""}, "categories"),
        ({"categories": "6x6-1box,6x6-1box"}, "twice"),
        ({"max_turns": 0}, "max_turns"),
        ({"max_turns": 2.5}, "max_turns"),
        ({"max_turns": True}, "max_turns"),
        ({"test_rooms": -1}, "test_rooms"),
        ({"test_rooms": 50, "eval_rooms": 100, "rooms_per_category": 150}, "rooms_per_category"),
        ({"min_solution_moves": 5, "max_solution_moves": 4}, "max_solution_moves"),
        ({"step_penalty": float("nan")}, "step_penalty"),
        ({"solved_reward": float("inf")}, "solved_reward"),
        ({"box_on_target_reward": "1"}, "box_on_target_reward"),
        ({"show_legend": "yes"}, "show_legend"),
        ({"categories": None}, "categories is empty: give category names"),  # categories=
        ({"reverse_steps": 100_000_000}, "reverse_steps \\(100000000\\) must be at most 1,000"),
        ({"rooms_per_category": 10**12}, "rooms_per_category .* must be at most 1,000,000"),
    ],
)
def test_bad_settings_name_the_field(settings, field):
    with pytest.raises(ConfigError, match=field):
        SokobanConfig(**settings)
    with pytest.raises(ConfigError):
        envs.registry.check_config("sokoban", settings)


def test_categories_accept_a_comma_separated_string():
    config = SokobanConfig(categories=" 7x7-2box, 6x6-1box ")
    assert config.categories == ("7x7-2box", "6x6-1box")
    assert SokobanConfig(rooms_per_category=200, reverse_steps=50).step_penalty == -0.1
    # --env-option values are YAML scalars: a string of categories, an int for a float field.
    settings = {"categories": "6x6-1box", "solved_reward": 5, "max_turns": 30}
    assert envs.registry.check_config("sokoban", settings) == settings
    env = envs.make("sokoban", **settings)
    assert env.reset(seed=3)[1]["category"] == "6x6-1box" and env.config.solved_reward == 5.0


def test_impossible_room_settings_are_a_config_error():
    env = envs.make("sokoban", categories="6x6-1box", min_solution_moves=40, max_solution_moves=40)
    with pytest.raises(ConfigError, match="min_solution_moves"):
        env.reset(seed=0)
