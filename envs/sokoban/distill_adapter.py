"""What the distiller knows about Sokoban (:class:`SokobanDistillAdapter`).

An episode record keeps only the last turn's :class:`SokobanStepOutcome` as its breakdown, so the
adapter replays the recorded moves from the first observation's grid (the rules are
deterministic) to get every turn's outcome: :class:`SokobanEpisode`. A failure whose replay shows
a deadlock (a box pushed into a corner, against a wall with no target along it, onto a dead
square, or into a frozen 2x2 block) becomes a note naming the turn, the push and the walls that
trap the box, with the solver's plan from just before that push as the correction. Leaks: grid
coordinates, room ids and copied grid rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envs.distill_adapter import LeakPattern, Lesson, PlainDistillAdapter, SuccessLesson
from envs.sokoban.config import DEFAULT_CATEGORIES, SokobanConfig
from envs.sokoban.env import SokobanEnv
from envs.sokoban.outcome import SokobanStepOutcome
from envs.sokoban.room import DIRECTIONS, GridError, State, parse_grid
from envs.sokoban.solver import solve
from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord

RESCUE_EXPANSIONS = 50_000
"""Search budget of the solver plan offered as a note's correction."""
_CATEGORY = re.compile(r"^(\d+)x(\d+)-(\d+)box(?:es)?$")
_SIDES = {"up": "above it", "down": "below it", "left": "to its left", "right": "to its right"}
_TRAP = {
    "corner": "into a corner",
    "wall": "against a wall with no target along it",
    "dead_square": "onto a square from which no push reaches a target",
    "block": "into a 2x2 block of walls and boxes",
}
_TITLES = {
    "corner": "Never push a box into a corner that is not a target",
    "wall": "Push a box against a wall only when a target lies along that wall",
    "dead_square": "Never push a box onto a square it cannot leave toward a target",
    "block": "Never push boxes into a 2x2 block off the targets",
}
_PRINCIPLES = {
    "corner": (
        "A box in a corner can never move again: before each push, look at the square the box "
        "will land on, and if walls close it on two adjacent sides, push only when it is a target."
    ),
    "wall": (
        "A box pushed against a wall can only slide along that wall: push it there only when a "
        "target lies on the same wall, otherwise push it along the open floor."
    ),
    "dead_square": (
        "Some squares lead nowhere: push a box only onto squares from which a straight push "
        "line toward a target remains."
    ),
    "block": (
        "Boxes side by side against a wall, or four in a square, freeze each other: never push "
        "a box next to another box along a wall unless both stand on targets."
    ),
}


@dataclass(frozen=True)
class SokobanEpisode:
    """Every turn's outcome of a replayed episode, and what the first deadlock trapped."""

    steps: tuple[SokobanStepOutcome, ...]
    deadlock_turn: int | None = None
    """Index of the first turn whose push made the room unsolvable (None if none did)."""
    trap_walls: tuple[str, ...] = ()
    """Directions, seen from the trapped box, in which walls touch it after that push."""
    rescue: tuple[str, ...] | None = None
    """A solution from the state just before the deadlock push (None when none was found)."""

    @property
    def solved(self) -> bool:
        """Whether the last turn solved the room."""
        return bool(self.steps) and self.steps[-1].solved

    @property
    def pushes(self) -> int:
        """Turns that moved a box."""
        return sum(s.pushed for s in self.steps)

    @property
    def blocked(self) -> int:
        """Parsed moves that did nothing."""
        return sum(s.blocked for s in self.steps)

    @property
    def deadlock(self) -> SokobanStepOutcome | None:
        """The first deadlock push's outcome."""
        return None if self.deadlock_turn is None else self.steps[self.deadlock_turn]

    def explain(self) -> str:
        """Describe what the judge saw, as lines (no coordinates)."""
        last = self.steps[-1] if self.steps else None
        lines = [
            f"- solved: {'yes' if self.solved else 'no'}",
            f"- boxes on targets at the end: {last.boxes_on_target if last else 0}/"
            f"{last.num_boxes if last else 0}",
            f"- moves: {len(self.steps)}, pushes: {self.pushes}, blocked moves: {self.blocked}",
        ]
        if (step := self.deadlock) is not None and step.deadlock_kind:
            lines.append(
                f"- turn {self.deadlock_turn}: pushing {step.action} moved a box "
                f"{trap_words(step.deadlock_kind, self.trap_walls)}; deadlock, the room could "
                "no longer be solved"
            )
        return "\n".join(lines)


def trap_words(kind: str, walls: tuple[str, ...]) -> str:
    """E.g. ``into a corner (walls above it and to its left)``."""
    where = " and ".join(_SIDES[w] for w in walls)
    return _TRAP[kind] + (f" (walls {where})" if where and kind != "block" else "")


def replay(episode: EpisodeRecord) -> SokobanEpisode | None:
    """Replay ``episode``'s moves from its first grid; None when there is no grid to replay."""
    if not episode.turns:
        return None
    try:
        parse_grid(episode.turns[0].observation)
    except GridError:
        return None
    env = SokobanEnv(SokobanConfig(max_turns=len(episode.turns) + 1))
    try:
        env.reset(options={"room": episode.turns[0].observation})
    except ConfigError:
        return None
    room = env.level.puzzle.room if env.level else None
    steps: list[SokobanStepOutcome] = []
    first: int | None = None
    before: State | None = None
    for turn in episode.turns:
        state = env.state
        info = env.step(turn.action)[4]
        step = SokobanStepOutcome.from_dict(info["reward_breakdown"])
        if first is None and step.deadlock:
            first, before = len(steps), state
        steps.append(step)
    walls: tuple[str, ...] = ()
    rescue = None
    if first is not None and room is not None and before is not None:
        box = steps[first].box_to
        if box is not None:
            cell = box[0] * room.width + box[1]
            walls = tuple(d for d in DIRECTIONS if room.is_wall(cell + room.offset(d)))
        solution = solve(room, before, RESCUE_EXPANSIONS)
        rescue = solution.moves if solution is not None else None
    return SokobanEpisode(tuple(steps), first, walls, rescue)


class SokobanDistillAdapter(PlainDistillAdapter):
    """Sokoban's replayed outcomes, deadlock notes, push-plan skills and coordinate leaks."""

    env_id = "sokoban"
    categories = DEFAULT_CATEGORIES
    leak_patterns = (
        LeakPattern(re.compile(r"\b\d{1,2}x\d{1,2}-\d+box(?:es)?-\d+\b", re.I), "a room id"),
        LeakPattern(re.compile(r"\bcustom-[0-9a-f]{6,}\b", re.I), "a room id"),
        LeakPattern(
            re.compile(r"\b(?:row|column|col|cell)\s*#?\d+|\(\s*\d+\s*,\s*\d+\s*\)", re.I),
            "a grid coordinate",
        ),
        LeakPattern(
            re.compile(r"(?<![\w#*])(?=[#_OX*PS]*#)(?=[#_OX*PS]*_)[#_OX*PS]{4,}(?![\w#*])"),
            "a copy of the room's grid",
        ),
    )
    specifics_rule = (
        "never write row or column numbers, coordinates, room ids or rows of the grid: say "
        "where a box is by what surrounds it (a corner, a wall, a target). Naming a move "
        "(up, down, left, right) is fine."
    )

    def outcome(self, episode: EpisodeRecord) -> SokobanEpisode | None:
        """Return the replayed episode (None when its first observation holds no grid)."""
        return replay(episode)

    def summarise_actions(self, episode: EpisodeRecord) -> str:
        """Return one line per turn: what the move did and earned."""
        replayed = replay(episode)
        if replayed is None:
            return super().summarise_actions(episode)
        return "\n".join(
            f"{turn.turn}. {turn.action}: {step.explain()}"
            for turn, step in zip(episode.turns, replayed.steps, strict=True)
        )

    def failure_lessons(self, episode: EpisodeRecord) -> list[Lesson]:
        """Return a note on the first deadlock if there was one, else on why the turns ran out."""
        replayed = replay(episode)
        if replayed is None:
            return super().failure_lessons(episode)
        step = replayed.deadlock
        if step is not None and step.deadlock_kind:
            return [deadlock_lesson(replayed, step)]
        invalid = self.invalid_actions_lesson(episode)
        if invalid is not None:
            return [invalid]
        return [out_of_turns_lesson(replayed)]

    def success_lesson(self, episode: EpisodeRecord) -> SuccessLesson:
        """Return how the room was solved, as a plan for its difficulty."""
        replayed = replay(episode)
        boxes = replayed.steps[-1].num_boxes if replayed and replayed.steps else 1
        label = self.category_label(episode.category)
        steps = [
            "find for each box a target it can reach by straight pushes",
            "walk around to the side of the box opposite that target",
            "push it along that line, never into a corner or along a wall without a target",
        ]
        if boxes > 1:
            steps.insert(1, "place first the box that would block the others' paths")
        if replayed is not None and replayed.blocked:
            steps.append("read the grid before each move so that no move walks into a wall")
        steps.append("stop as soon as every box stands on a target")
        text = "; ".join(steps)
        return SuccessLesson(
            Lesson(
                title=f"{label}: push each box to a target along open lines",
                principle=text[0].upper() + text[1:] + ".",
                when_to_apply=f"Playing a {label.lower()}.",
            ),
            "push_plan",
        )

    def general_lesson(self, pattern: str) -> Lesson:
        """Return the general lesson of irreversible moves: keep the goal reachable."""
        return Lesson(
            title="Check that each irreversible move keeps the goal reachable",
            principle=(
                "Before a move that cannot be undone, check that the goal can still be reached "
                "afterwards; a longer route beats an irreversible shortcut."
            ),
            when_to_apply="Any task where some moves cannot be undone.",
        )

    def category_label(self, category: str) -> str:
        """Return ``7x7-2box`` as ``7x7 room with 2 boxes``."""
        match = _CATEGORY.match(category)
        if match is None:
            return super().category_label(category)
        boxes = int(match.group(3))
        return f"{match.group(1)}x{match.group(2)} room with {boxes} box{'es' if boxes > 1 else ''}"


def deadlock_lesson(replayed: SokobanEpisode, step: SokobanStepOutcome) -> Lesson:
    """Return the note of a deadlock push: where, which push, what would have saved the room."""
    kind = step.deadlock_kind or "dead_square"
    if replayed.rescue:
        plan = ", ".join(replayed.rescue[:6]) + (" ..." if len(replayed.rescue) > 6 else "")
        correction = (
            f"do not push {step.action} there; from just before that push the room was still "
            f"solvable ({plan}): push the box toward a target instead"
        )
    else:
        correction = "walk around the box and push it toward a target from the other side"
    return Lesson(
        title=_TITLES[kind],
        principle=_PRINCIPLES[kind],
        when_to_apply="Before pushing a box next to a wall or into a corner.",
        failure_point=(
            f"turn {replayed.deadlock_turn}: pushed a box {step.action} "
            f"{trap_words(kind, replayed.trap_walls)}, off every target; from then on the room "
            "could not be solved"
        ),
        flawed_action=f"{step.action}, pushing the box {_TRAP[kind]}",
        correction=correction,
    )


def out_of_turns_lesson(replayed: SokobanEpisode) -> Lesson:
    """Return the note of an episode that ran out of turns without a deadlock."""
    moves = len(replayed.steps)
    last = replayed.steps[-1]
    if replayed.blocked * 2 >= moves:
        return Lesson(
            title="Read the grid before moving: do not walk into walls",
            principle=(
                "Before each move, check the square in that direction: step onto floor or a "
                "target, or push a box only when floor lies beyond it."
            ),
            when_to_apply="Every move.",
            failure_point=f"used all {moves} turns with {last.boxes_on_target}/"
            f"{last.num_boxes} boxes on targets",
            flawed_action=f"{replayed.blocked} of {moves} moves were blocked by a wall or a box",
            correction="pick a move whose square is free, or a push with floor beyond the box",
        )
    return Lesson(
        title="Push boxes toward targets within the turn budget",
        principle=(
            "Plan the pushes first: walk straight to the side of a box opposite its target and "
            "push it along the shortest line; do not wander without pushing."
        ),
        when_to_apply="When half of the turns are used and boxes are still off target.",
        failure_point=f"used all {moves} turns with {last.boxes_on_target}/{last.num_boxes} "
        "boxes on targets",
        flawed_action=f"{moves - replayed.pushes} of {moves} moves pushed no box",
        correction="walk to the far side of a box and push it straight toward its target",
    )
