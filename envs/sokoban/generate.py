"""Procedural Sokoban rooms by reverse play from the solved state, as gym-sokoban makes them.

1. Topology: a random walk over the grid stamps small floor shapes (a bar, an elbow, a 2x2
   square) around each position it visits; the border stays wall. gym-sokoban's walk length,
   ``1.7 * (width + height)``, and its 0.35 chance of turning at each step.
2. Placement: the player and one target per box on random floor cells; every box starts on a
   target (the solved state).
3. Reverse play: the player walks at random and, stepping away from an adjacent box, pulls it
   along. The pull is a push played backwards, so every state reached can be pushed back to the
   solved one: the room is solvable by construction. gym-sokoban scores each visited state by
   ``box swaps x total box displacement`` and keeps the best with every box off its target; this
   does the same over a few random walks (gym-sokoban searches the pulls exhaustively, which
   costs seconds on 8x8 rooms), then lets the player wander a few steps, as RAGEN does, so that
   it does not always start next to a box.
4. Check: the solver (``envs.sokoban.solver``) must solve the room; its plan length is stored as
   the room's optimal number of moves. A room that fails the check, or whose optimal solution
   is shorter than ``min_moves`` or longer than ``max_moves``, is thrown away and the next
   attempt of the same random stream is tried.

Everything draws from one ``random.Random`` seeded by the caller, so a seed is a room.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from envs.sokoban.room import DIRECTIONS, Room, State, apply_move
from envs.sokoban.solver import push_distances, solve

# Floor shapes stamped by the topology walk, as (row, column) offsets from the walk's position.
_SHAPES: tuple[tuple[tuple[int, int], ...], ...] = (
    ((0, -1), (0, 0), (0, 1)),  # horizontal bar
    ((-1, 0), (0, 0), (1, 0)),  # vertical bar
    ((0, -1), (0, 0), (1, 0)),  # elbow left-down
    ((0, -1), (0, 0), (1, -1), (1, 0)),  # 2x2 square
    ((0, 0), (0, 1), (1, 0)),  # elbow right-down
)
_STEPS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
_TURN_PROBABILITY = 0.35
_REVERSE_WALKS = 10
_MAX_ATTEMPTS = 200


@dataclass(frozen=True)
class Puzzle:
    """A generated room, its start state and the length of an optimal solution."""

    room: Room
    start: State
    optimal_moves: int
    solution: tuple[str, ...]


def carve_topology(rng: random.Random, width: int, height: int) -> frozenset[int]:
    """Return the floor cells carved by gym-sokoban-style random walk (border left as wall)."""
    floor: set[int] = set()
    row, column = rng.randint(1, height - 2), rng.randint(1, width - 2)
    direction = rng.choice(DIRECTIONS)
    for _ in range(int(1.7 * (width + height))):
        if rng.random() < _TURN_PROBABILITY:
            direction = rng.choice(DIRECTIONS)
        dr, dc = _STEPS[direction]
        row = min(max(row + dr, 1), height - 2)
        column = min(max(column + dc, 1), width - 2)
        for sr, sc in rng.choice(_SHAPES):
            r, c = row + sr, column + sc
            if 0 < r < height - 1 and 0 < c < width - 1:
                floor.add(r * width + c)
    return frozenset(floor)


def _score(swaps: int, boxes: dict[int, int], width: int) -> int:
    """gym-sokoban's room score: box swaps x sum of Manhattan displacements from the targets."""
    return swaps * sum(
        abs(a // width - b // width) + abs(a % width - b % width) for a, b in boxes.items()
    )


def reverse_play(
    rng: random.Random, room: Room, player: int, steps: int
) -> tuple[State, int] | None:
    """Pull boxes away from their targets by random reverse play; the best state and its score.

    Returns None when no walk left every box off the targets.
    """
    best: tuple[int, State] | None = None
    for _ in range(_REVERSE_WALKS):
        position = {t: t for t in room.targets}  # target -> where its box is now
        at, last_pulled, swaps = player, None, 0
        for _ in range(steps):
            direction = rng.choice(DIRECTIONS)
            step = room.offset(direction)
            ahead = at + step
            occupied = set(position.values())
            if room.is_wall(ahead) or ahead in occupied:
                continue
            behind = at - step
            if behind in occupied and rng.random() < 0.8:
                origin = next(t for t, b in position.items() if b == behind)
                position[origin] = at
                if origin != last_pulled:
                    swaps, last_pulled = swaps + 1, origin
            at = ahead
            boxes = frozenset(position.values())
            if boxes & room.targets:
                continue
            score = _score(swaps, position, room.width)
            if score > 0 and (best is None or score > best[0]):
                best = (score, State(at, boxes))
    if best is None:
        return None
    return best[1], best[0]


def _wander(rng: random.Random, room: Room, state: State) -> State:
    """Move the player up to three steps without pushing, so it need not start next to a box."""
    for _ in range(rng.randint(0, 3)):
        options = [
            d
            for d in DIRECTIONS
            if not room.is_wall(state.player + room.offset(d))
            and state.player + room.offset(d) not in state.boxes
        ]
        if not options:
            break
        state = apply_move(room, state, rng.choice(options)).state
    return state


def generate_puzzle(
    rng: random.Random,
    width: int,
    height: int,
    num_boxes: int,
    *,
    reverse_steps: int,
    min_moves: int = 1,
    max_moves: int,
    max_expansions: int = 50_000,
) -> Puzzle:
    """Generate one solvable room from ``rng`` (see the module docstring for the recipe).

    Raises RuntimeError if no acceptable room turns up in a few hundred attempts (only for
    settings that cannot work, such as more boxes than a room of that size can hold).
    """
    for _ in range(_MAX_ATTEMPTS):
        floor = carve_topology(rng, width, height)
        if len(floor) < num_boxes + 3:
            continue
        cells = sorted(floor)
        chosen = rng.sample(cells, num_boxes + 1)
        room = Room(width, height, floor, frozenset(chosen[1:]))
        if len(push_distances(room)) <= num_boxes:
            continue  # no cell off the targets from which a box could be pushed home
        played = reverse_play(rng, room, chosen[0], reverse_steps)
        if played is None:
            continue
        start = _wander(rng, room, played[0])
        solution = solve(room, start, max_expansions)
        if solution is None or not min_moves <= len(solution.moves) <= max_moves:
            continue
        return Puzzle(room, start, len(solution.moves), solution.moves)
    raise RuntimeError(
        f"no solvable {width}x{height} room with {num_boxes} box(es) in {min_moves}-{max_moves} "
        f"moves "
        f"after {_MAX_ATTEMPTS} attempts"
    )
