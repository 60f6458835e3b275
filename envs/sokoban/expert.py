"""A scripted Sokoban expert: reads the grid in the observation and plays an optimal plan.

It sees only what an agent sees (the observation's grid). Each turn it checks whether the grid
is the state its cached plan expects; if so it plays the plan's next move, otherwise (first
turn, or the state came from somewhere else, e.g. a learner's detour before the expert took
over) it solves the room again from the grid with the move-optimal solver. From a deadlocked
or unreadable state it plays a move that is not blocked, so an episode still runs to its end.
"""

from __future__ import annotations

from typing import Any

from envs.sokoban.room import DIRECTIONS, GridError, Room, State, apply_move, parse_grid
from envs.sokoban.solver import solve


class SokobanExpert:
    """Plays one Sokoban episode at a time from observations (the grid) alone."""

    def __init__(self, max_turns: int = 20, max_expansions: int = 200_000) -> None:
        # max_turns keeps WebShopExpert's constructor; an optimal plan is already the best use
        # of any turn budget, so play does not depend on it.
        self.max_turns = max_turns
        self.max_expansions = max_expansions
        self.plan: list[str] = []
        self.expected: tuple[Room, State] | None = None
        self.solves = 0
        """How many times the expert ran the solver this episode (1 when nothing deviated)."""

    def reset(self, reset_info: dict[str, Any]) -> None:
        """Start an episode (the reset info is not needed: the grid says everything)."""
        self.plan, self.expected, self.solves = [], None, 0

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """Return the next move for the grid in ``observation``."""
        try:
            room, state = parse_grid(observation)
        except GridError:
            return DIRECTIONS[0]
        if not self.plan or self.expected != (room, state):
            solution = solve(room, state, self.max_expansions)
            self.solves += 1
            self.plan = list(solution.moves) if solution is not None else []
        if not self.plan:
            self.expected = None
            return self._unblocked(room, state)
        move = self.plan.pop(0)
        self.expected = (room, apply_move(room, state, move).state)
        return move

    def label(self, observation: str, info: dict[str, Any]) -> str | None:
        """Return the optimal move from the grid in ``observation``, or None where no plan exists.

        DAgger asks this at every state the learner reaches. From a deadlocked room (a box no
        push can bring to a target) or an unreadable grid there is no right move to teach: the
        move :meth:`act` would play there only keeps the episode going, so it is not a label.
        """
        move = self.act(observation, info)
        return move if self.expected is not None else None

    @staticmethod
    def _unblocked(room: Room, state: State) -> str:
        for direction in DIRECTIONS:
            if apply_move(room, state, direction).moved:
                return direction
        return DIRECTIONS[0]
