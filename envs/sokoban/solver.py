"""A move-optimal Sokoban solver (A* over pushes) and simple deadlock detection.

The search runs over states reached right after a push: the player then stands where the box
was, so a state is exactly ``(player, boxes)``, and an edge is "walk to the cell behind a box,
then push it one cell", costing the walk's length plus one. The start state may have the player
anywhere. This finds a plan with the fewest *moves* (what the environment counts as turns), not
the fewest pushes, while expanding far fewer states than a search over single moves.

Heuristic: the sum, over boxes, of the fewest pushes that bring that box to any target in an
otherwise empty room. Each move pushes at most one box one cell, so it is admissible and
consistent, and A* returns an optimal plan.

Pruning never cuts a solvable state: a box is never pushed onto a *dead square* (a floor cell
from which no sequence of pushes can bring a box to any target, found by pulling backwards from
every target), nor into a 2x2 block of walls and boxes that holds a box off target (no box in
such a block can ever move again).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass
from functools import lru_cache

from envs.sokoban.room import DIRECTIONS, Room, State, apply_move


@lru_cache(maxsize=4096)
def push_distances(room: Room) -> dict[int, int]:
    """Return, per cell from which a box can reach a target, the fewest pushes it needs.

    Cells missing from the result are dead squares. Other boxes are ignored.
    """
    distances = dict.fromkeys(room.targets, 0)
    queue = deque(room.targets)
    while queue:
        cell = queue.popleft()
        for direction in DIRECTIONS:
            step = room.offset(direction)
            # A push of a box from `cell - step` to `cell` needs the player at `cell - 2*step`.
            before, player = cell - step, cell - 2 * step
            if before in room.floor and player in room.floor and before not in distances:
                distances[before] = distances[cell] + 1
                queue.append(before)
    return distances


def dead_squares(room: Room) -> frozenset[int]:
    """Return the floor cells from which a box can never reach any target."""
    return frozenset(room.floor - push_distances(room).keys())


def dead_square_kind(room: Room, cell: int) -> str:
    """Name why a dead square is dead: ``corner``, ``wall`` (along one) or ``dead_square``."""
    walls = {d for d in DIRECTIONS if room.is_wall(cell + room.offset(d))}
    if walls & {"up", "down"} and walls & {"left", "right"}:
        return "corner"
    return "wall" if walls else "dead_square"


def frozen_block(room: Room, boxes: frozenset[int], cell: int) -> bool:
    """Whether the box at ``cell`` sits in a 2x2 block of walls/boxes holding a box off target."""
    w = room.width
    for corner in (cell, cell - 1, cell - w, cell - w - 1):
        block = (corner, corner + 1, corner + w, corner + w + 1)
        if all(room.is_wall(c) or c in boxes for c in block):
            if any(c in boxes and c not in room.targets for c in block):
                return True
    return False


def walk(room: Room, boxes: frozenset[int], start: int) -> dict[int, tuple[int, str] | None]:
    """Breadth-first walk from ``start`` around ``boxes``: cell -> (previous cell, direction)."""
    parents: dict[int, tuple[int, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        for direction in DIRECTIONS:
            nxt = cell + room.offset(direction)
            if nxt in room.floor and nxt not in boxes and nxt not in parents:
                parents[nxt] = (cell, direction)
                queue.append(nxt)
    return parents


def _path(parents: dict[int, tuple[int, str] | None], end: int) -> list[str]:
    path = []
    link = parents[end]
    while link is not None:
        cell, direction = link
        path.append(direction)
        link = parents[cell]
    path.reverse()
    return path


@dataclass(frozen=True)
class Solution:
    """An optimal plan and how much search it took."""

    moves: tuple[str, ...]
    expanded: int


def _heuristic(distances: dict[int, int], boxes: frozenset[int]) -> int:
    return sum(distances[b] for b in boxes)


def solve(room: Room, state: State, max_expansions: int = 200_000) -> Solution | None:
    """Return a plan with the fewest moves that solves ``state``, or None.

    None means unsolvable, or that no plan was found within ``max_expansions`` expanded states.
    """
    distances = push_distances(room)
    if any(b not in distances for b in state.boxes):
        return None  # a box already stands on a dead square
    start = (state.player, state.boxes)
    best = {start: 0}
    came_from: dict[tuple[int, frozenset[int]], tuple[tuple[int, frozenset[int]], int, str]] = {}
    counter = 0
    frontier = [(_heuristic(distances, state.boxes), 0, counter, start)]
    expanded = 0
    while frontier:
        _, g, _, node = heapq.heappop(frontier)
        if g > best[node]:
            continue
        player, boxes = node
        if boxes <= room.targets:
            return Solution(_plan(room, node, came_from), expanded)
        expanded += 1
        if expanded > max_expansions:
            return None
        reach = walk(room, boxes, player)
        walked = {cell: 0 for cell in reach}
        for cell in reach:  # walk lengths, from the parent links (reach is in BFS order)
            link = reach[cell]
            walked[cell] = 0 if link is None else walked[link[0]] + 1
        for box in boxes:
            for direction in DIRECTIONS:
                step = room.offset(direction)
                behind, ahead = box - step, box + step
                if behind not in reach or ahead not in distances or ahead in boxes:
                    continue
                moved = (boxes - {box}) | {ahead}
                if frozen_block(room, moved, ahead):
                    continue
                nxt = (box, moved)
                cost = g + walked[behind] + 1
                if cost < best.get(nxt, 1 << 30):
                    best[nxt] = cost
                    came_from[nxt] = (node, behind, direction)
                    counter += 1
                    f = cost + _heuristic(distances, moved)
                    heapq.heappush(frontier, (f, cost, counter, nxt))
    return None


def _plan(
    room: Room,
    node: tuple[int, frozenset[int]],
    came_from: dict[tuple[int, frozenset[int]], tuple[tuple[int, frozenset[int]], int, str]],
) -> tuple[str, ...]:
    pieces: list[list[str]] = []
    while node in came_from:
        previous, behind, direction = came_from[node]
        pieces.append([*_path(walk(room, previous[1], previous[0]), behind), direction])
        node = previous
    return tuple(move for piece in reversed(pieces) for move in piece)


def replay(room: Room, state: State, moves: tuple[str, ...] | list[str]) -> State:
    """Return the state after playing ``moves`` from ``state`` (blocked moves do nothing)."""
    for direction in moves:
        state = apply_move(room, state, direction).state
    return state
