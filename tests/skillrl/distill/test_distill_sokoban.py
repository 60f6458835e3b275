"""The distiller on Sokoban: deadlock notes, push-plan skills, room specifics rejected."""

from __future__ import annotations

import pytest
from sokoban_episodes import CORNER_ROOM, INTO_THE_CORNER, SOLUTION, play

import envs
from skillrl.distill.analytic import AnalyticDistiller
from skillrl.distill.leakage import draft_leaks, find_leaks
from skillrl.distill.teacher import TeacherConfig, build_conversation

# Push the box left from the middle against the left wall: no target along that wall.
AGAINST_THE_WALL = ["right", "up", "left", "down"]


def test_a_box_pushed_into_a_corner_gives_a_note_naming_the_deadlock():
    failed = play(INTO_THE_CORNER)
    assert not failed.success and failed.category == "6x6-1box"
    [note] = AnalyticDistiller().distill([failed])
    assert note.kind == "mistake" and (note.env, note.category) == ("sokoban", "6x6-1box")
    assert note.title == "Never push a box into a corner that is not a target"
    assert note.failure_point == (
        "turn 3: pushed a box left into a corner (walls above it and to its left), off every "
        "target; from then on the room could not be solved"
    )
    assert note.flawed_action == "left, pushing the box into a corner"
    assert "corner" in note.principle and note.trajectory_ids == [failed.episode_id]
    assert draft_leaks(note, [failed]) == []


def test_the_correction_is_a_plan_that_really_solves_the_room_from_before_the_push():
    [note] = AnalyticDistiller().distill([play(INTO_THE_CORNER)])
    plan = note.correction.split("(")[1].split(")")[0].split(", ")
    assert play(INTO_THE_CORNER[:3] + plan).success


def test_a_box_pushed_against_a_wall_without_target_is_a_wall_deadlock():
    [note] = AnalyticDistiller().distill([play(AGAINST_THE_WALL)])
    assert note.title == "Push a box against a wall only when a target lies along that wall"
    assert note.failure_point.startswith(
        "turn 2: pushed a box left against a wall with no target along it (walls to its left)"
    )


def test_walking_into_walls_without_a_deadlock_is_explained_by_the_blocked_moves():
    [note] = AnalyticDistiller().distill([play(["down"] * 6)])
    assert note.title.startswith("Read the grid before moving")
    assert note.flawed_action == "5 of 6 moves were blocked by a wall or a box"
    assert note.failure_point == "used all 6 turns with 0/1 boxes on targets"


def test_a_success_becomes_a_task_skill_for_its_category():
    won = play(SOLUTION)
    assert won.success
    [skill] = AnalyticDistiller().distill([won])
    assert skill.kind == "task" and (skill.env, skill.category) == ("sokoban", "6x6-1box")
    assert skill.title == "6x6 room with 1 box: push each box to a target along open lines"
    assert "never into a corner" in skill.principle
    assert draft_leaks(skill, [won]) == []


def _solved(category_index: int):
    env = envs.make("sokoban")
    env.reset(options={"split": "train", "goal_index": category_index})
    moves = list(env.level.puzzle.solution)
    return play(moves, {"split": "train", "goal_index": category_index})


def test_generated_rooms_of_two_categories_make_a_general_skill():
    wins = [_solved(0), _solved(1)]
    assert [w.success for w in wins] == [True, True]
    assert {w.category for w in wins} == {"6x6-1box", "7x7-2box"}
    drafts = AnalyticDistiller().distill(wins)
    [general] = [d for d in drafts if d.kind == "general"]
    assert general.env is None and "irreversible" in general.title
    two_boxes = next(d for d in drafts if d.category == "7x7-2box")
    assert "place first the box" in two_boxes.principle.lower()
    assert all(draft_leaks(d, wins) == [] for d in drafts)


@pytest.mark.parametrize(
    "text",
    [
        "the box at row 2, column 3 is stuck",
        "push the box from (1, 2) to (1, 3)",
        "room 6x6-1box-0042 needs two pushes",
        "the room custom-832dd3e111b7 is easy",
        "the top row reads #__O_# so go right",
    ],
)
def test_room_specifics_leak(text):
    assert find_leaks(text, env="sokoban")


def test_grid_rows_of_the_episode_leak_and_the_goal_id_too():
    failed = play(INTO_THE_CORNER)
    row = CORNER_ROOM.splitlines()[2]
    assert any("grid" in r for r in find_leaks(f"start from {row}", [failed]))
    assert any("id" in r for r in find_leaks(f"in {failed.goal_id} go up", [failed]))


def test_the_teacher_is_told_each_step_and_the_deadlock_and_to_avoid_coordinates():
    system, user = build_conversation(play(INTO_THE_CORNER), TeacherConfig())
    assert "coordinates" in system["content"] and "product" not in system["content"]
    text = user["content"]
    assert "3. left: Moved left, pushing a box" in text
    assert "turn 3: pushing left moved a box into a corner" in text
