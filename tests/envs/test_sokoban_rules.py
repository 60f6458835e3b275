"""Sokoban rules on hand-written rooms: moves, pushes, per-turn rewards, deadlocks, parsing."""

from __future__ import annotations

import json

import pytest

import envs
from envs.sokoban.parse import parse_move
from envs.sokoban.room import GridError, State, apply_move, parse_grid, render_grid
from envs.sokoban.solver import dead_squares, push_distances, replay, solve
from skillrl_core.errors import ConfigError

# Two boxes: one next to the player with a target right behind it, one two cells from home.
TWO_BOXES = """
########
#______#
#PXO___#
#______#
#___XO_#
########
"""


def _env(grid: str, **config):
    env = envs.make("sokoban", **config)
    obs, info = env.reset(options={"room": grid})
    return env, obs, info


def _play(env, moves):
    return [env.step(m) for m in moves]


def test_rewards_per_turn_on_off_and_solved():
    env, _, info = _env(TWO_BOXES)
    assert info["boxes_on_target"] == 0 and info["num_boxes"] == 2
    steps = _play(env, ["right", "right", "up", "right", "right", "down", "left"])
    rewards = [s[1] for s in steps]
    # on target +1, off target -1, four walks, pushed back on: each with the -0.1 step cost
    assert rewards == pytest.approx([0.9, -1.1, -0.1, -0.1, -0.1, -0.1, 0.9])
    on = steps[0][4]["reward_breakdown"]
    assert on["boxes_on_target_delta"] == 1 and on["box_reward"] == 1.0
    assert on["pushed"] and on["box_from"] == [2, 2] and on["box_to"] == [2, 3]
    off = steps[1][4]["reward_breakdown"]
    assert off["boxes_on_target_delta"] == -1 and off["box_reward"] == -1.0
    walk = steps[2][4]["reward_breakdown"]
    assert walk["moved"] and not walk["pushed"] and walk["reward"] == pytest.approx(-0.1)
    # Now solve: walk around to the left of the second box, push it right onto its target.
    steps = _play(env, ["down", "left", "down", "right"])
    assert [s[1] for s in steps] == pytest.approx([-0.1, -0.1, -0.1, 10.9])
    obs, reward, terminated, truncated, info = steps[-1]
    assert terminated and not truncated and info["success"]
    assert info["end_reason"] == "solved"
    assert info["reward_breakdown"]["solved"] and info["reward_breakdown"]["solved_bonus"] == 10.0
    assert info["available_actions"] == []
    assert info["episode_return"] == pytest.approx(0.9 - 1.1 - 0.4 + 0.9 - 0.3 + 10.9)
    assert "Boxes on targets: 2/2." in obs


def test_blocked_moves_cost_a_step_and_change_nothing():
    env, obs, _ = _env(TWO_BOXES)
    new_obs, reward, terminated, truncated, info = env.step("left")  # a wall
    assert (new_obs, reward, terminated, truncated) == (obs, -0.1, False, False)
    assert info["action_valid"] is True
    breakdown = info["reward_breakdown"]
    assert breakdown["blocked"] and not breakdown["moved"] and breakdown["step_cost"] == -0.1
    # A box against another box cannot be pushed either.
    env, obs, _ = _env("#######\n#PXX_O#\n#____O#\n#######")
    new_obs, reward, *_, info = env.step("right")
    assert new_obs == obs and reward == pytest.approx(-0.1) and info["reward_breakdown"]["blocked"]


@pytest.mark.parametrize("action", ["", "jump", "upp", "u", "north", "push", "up up", "click[up]"])
def test_unparsable_actions_are_free_no_ops_that_use_a_turn(action):
    env, obs, _ = _env(TWO_BOXES)
    new_obs, reward, terminated, truncated, info = env.step(action)
    assert (new_obs, reward, terminated, truncated) == (obs, 0.0, False, False)
    assert info["action_valid"] is False and info["turn"] == 1
    assert info["reward_breakdown"]["valid"] is False
    assert info["reward_breakdown"]["reward"] == 0.0


@pytest.mark.parametrize(
    ("text", "move"),
    [("up", "up"), ("  Down ", "down"), ("LEFT", "left"), ("push right", "right"),
     ("Move Up", "up"), ("push\tleft", "left")],
)  # fmt: skip
def test_moves_parse_case_insensitively_with_push_or_move(text, move):
    assert parse_move(text) == move


@pytest.mark.parametrize("text", ["\u017fup", "pu\u017fh up", "rightt", "up.", None, 3, "up" * 40])
def test_look_alikes_and_non_strings_do_not_parse(text):
    assert parse_move(text) is None


def test_pushing_along_a_wall_without_targets_is_flagged_as_a_deadlock():
    env, _, _ = _env("#######\n#_____#\n#__X__#\n#__P_O#\n#######")
    _, reward, terminated, _, info = env.step("up")
    breakdown = info["reward_breakdown"]
    assert reward == pytest.approx(-0.1) and not terminated
    assert breakdown["deadlock"] and breakdown["deadlock_kind"] == "wall"
    assert breakdown["stuck_boxes"] == 1
    assert "can never leave" in env_outcome_text(info)


def test_pushing_into_a_corner_is_a_corner_deadlock_that_ends_the_episode():
    env, _, _ = _env("#######\n#___X_#\n#_P___#\n#___O_#\n#######")
    steps = _play(env, ["up", "right"])  # box (1,4) -> (1,5): the top-right corner
    assert not any(terminated or truncated for _, _, terminated, truncated, _ in steps)
    assert steps[-1][4]["end_reason"] is None  # still running
    _, _, terminated, truncated, info = env.step("right")
    assert info["reward_breakdown"]["deadlock_kind"] == "corner"
    # A dead state: the MDP ended (terminated), not solved, and info says why.
    assert terminated and not truncated and info["success"] is False
    assert info["end_reason"] == "deadlock: a box off target in a corner"
    assert info["available_actions"] == [] and env.available_actions() == []
    after = env.step("left")  # a step after the end changes nothing
    assert after[1] == 0.0 and after[2] and after[4]["end_reason"] == info["end_reason"]


def test_a_wall_deadlock_plays_on_and_the_turn_limit_and_a_solve_say_why_they_ended():
    env, _, _ = _env("#######\n#_____#\n#__X__#\n#__P_O#\n#######", max_turns=2)
    _, _, terminated, truncated, info = env.step("up")  # along the top wall: flagged only
    assert info["reward_breakdown"]["deadlock_kind"] == "wall" and not terminated
    _, _, terminated, truncated, info = env.step("down")
    assert truncated and not terminated and info["end_reason"] == "max_turns"


def test_a_frozen_two_by_two_block_is_a_deadlock():
    # Row 1 holds a target, so its squares are live; two boxes side by side under the top wall
    # can still never move again.
    env, _, _ = _env("#######\n#OX___#\n#__X_O#\n#__P__#\n#######")
    info = env.step("up")[4]
    assert info["reward_breakdown"]["deadlock_kind"] == "block"


def test_a_push_onto_a_live_square_is_not_a_deadlock():
    env, _, _ = _env(TWO_BOXES)
    info = env.step("right")[4]
    assert info["reward_breakdown"]["deadlock"] is False
    assert info["reward_breakdown"]["stuck_boxes"] == 0


def env_outcome_text(info):
    from envs.sokoban.outcome import SokobanStepOutcome

    data = dict(info["reward_breakdown"])
    for key in ("box_from", "box_to"):
        if data[key] is not None:
            data[key] = tuple(data[key])
    return SokobanStepOutcome(**data).explain()


def test_explain_names_the_move_the_reward_and_the_progress():
    env, _, _ = _env(TWO_BOXES)
    text = env_outcome_text(env.step("right")[4])
    assert "pushing a box from row 2, column 2 to row 2, column 3" in text
    assert "onto a target (+1)" in text and "1/2 boxes on targets" in text
    assert text.endswith("Reward +0.9.")
    assert "not one of" in env_outcome_text(env.step("fly")[4])


def test_breakdown_is_json_and_round_trips():
    env, _, _ = _env(TWO_BOXES)
    info = env.step("right")[4]
    assert json.loads(json.dumps(info["reward_breakdown"])) == info["reward_breakdown"]


def test_grid_render_and_parse_round_trip():
    room, state = parse_grid(TWO_BOXES)
    assert render_grid(room, state) == TWO_BOXES.strip()
    assert state.player == 2 * 8 + 1 and len(room.targets) == 2


@pytest.mark.parametrize(
    "grid",
    ["", "hello", "#####\n#P_X#\n#####", "####\n#PX#\n#O_", "#####\n#XO_#\n#####",
     "#####\n#PPXO\n#####", "_####\n#PXO#\n#####"],
)  # fmt: skip
def test_malformed_grids_are_refused(grid):
    with pytest.raises(GridError):
        parse_grid(grid)
    with pytest.raises(ConfigError):
        envs.make("sokoban").reset(options={"room": grid})


def test_dead_squares_and_push_distances():
    room, _ = parse_grid("#######\n#_____#\n#__X__#\n#__P_O#\n#######")
    dead = dead_squares(room)
    # The top row has no target: a box pushed there never gets out.
    assert {7 + c for c in range(1, 6)} <= dead
    assert 3 * 7 + 5 not in dead  # the target itself
    assert push_distances(room)[3 * 7 + 4] == 1


def test_solver_is_move_optimal_on_a_hand_room():
    room, state = parse_grid(TWO_BOXES)
    solution = solve(room, state)
    assert solution is not None
    # Push the first box on (1), walk down-down-right to the second box's left (3), push (1).
    assert solution.moves == ("right", "down", "down", "right", "right")
    assert replay(room, state, solution.moves).solved(room)


def test_solver_says_none_for_a_deadlocked_room():
    room, state = parse_grid("#######\n#X____#\n#__P_O#\n#######")
    assert solve(room, state) is None


def test_apply_move_never_mutates_its_input():
    room, state = parse_grid(TWO_BOXES)
    before = State(state.player, state.boxes)
    apply_move(room, state, "right")
    assert state == before


def test_positions_mode_says_where_boxes_and_free_targets_are_from_the_player():
    import envs
    from envs.sokoban.room import describe_positions, parse_grid

    room, state = parse_grid("#####\n#P_X#\n#__O#\n#*__#\n#####")
    assert describe_positions(room, state).splitlines() == [
        "You are at row 1, column 1.",
        "Box at row 1, column 3: 2 right of you.",
        "Box at row 3, column 1: 2 down of you.",
        "Empty target at row 2, column 3: 1 down and 2 right of you.",
    ]
    env = envs.make("sokoban", categories="6x6-1box", observation_mode="positions")
    observation, _ = env.reset(seed=0, options={"split": "test", "goal_index": 0})
    grid_only = envs.make("sokoban", categories="6x6-1box")
    plain, _ = grid_only.reset(seed=0, options={"split": "test", "goal_index": 0})
    assert observation.startswith(plain) and "You are at row" in observation
    assert parse_grid(observation) == parse_grid(plain)  # the grid reads the same


def test_an_unknown_sokoban_observation_mode_is_refused_by_name():
    import pytest

    from envs.sokoban.config import SokobanConfig
    from skillrl_core.errors import ConfigError

    with pytest.raises(ConfigError, match="observation_mode .'pixels'. must be one of grid"):
        SokobanConfig(observation_mode="pixels")
