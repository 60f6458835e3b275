"""Sokoban rooms and states: the static layout, the moving parts, one move, and the text grid.

Cells are numbered ``row * width + column``. Every room is closed by walls on its border (as
gym-sokoban's generator leaves it), so a step never leaves the grid.

Move semantics are gym-sokoban's *push* actions (the ones RAGEN exposes as Up/Down/Left/Right):
stepping into a box pushes it when the cell beyond is floor without a box; otherwise the player
stays put (blocked). There is no pulling.

Text legend (RAGEN's symbols, except ``*`` for a box on a target where RAGEN prints ``√``, so
that the grid is plain ASCII): ``#`` wall, ``_`` floor, ``O`` target, ``X`` box, ``*`` box on
target, ``P`` player, ``S`` player on target.
"""

from __future__ import annotations

from dataclasses import dataclass

DIRECTIONS: tuple[str, ...] = ("up", "down", "left", "right")
"""The four moves, in gym-sokoban's action order (push up, down, left, right)."""

WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET = "#_OX*PS"
LEGEND = (
    f"{WALL} wall, {FLOOR} floor, {TARGET} target, {BOX} box, {BOX_ON_TARGET} box on target, "
    f"{PLAYER} player, {PLAYER_ON_TARGET} player on target"
)
GRID_SYMBOLS = frozenset(WALL + FLOOR + TARGET + BOX + BOX_ON_TARGET + PLAYER + PLAYER_ON_TARGET)


class GridError(ValueError):
    """A text grid is not a well-formed Sokoban room (the message says what is wrong)."""


@dataclass(frozen=True)
class Room:
    """The fixed part of a room: its size, its floor cells and its targets."""

    width: int
    height: int
    floor: frozenset[int]
    """Cells that are not walls (targets included)."""
    targets: frozenset[int]

    def offset(self, direction: str) -> int:
        """Return the cell-number change of one step in ``direction``."""
        return {"up": -self.width, "down": self.width, "left": -1, "right": 1}[direction]

    def position(self, cell: int) -> tuple[int, int]:
        """Return ``(row, column)`` of ``cell``."""
        return divmod(cell, self.width)

    def is_wall(self, cell: int) -> bool:
        """Whether ``cell`` is a wall (anything off the grid counts as one)."""
        return cell not in self.floor


@dataclass(frozen=True)
class State:
    """The moving part of a room: where the player and the boxes are."""

    player: int
    boxes: frozenset[int]

    def boxes_on_target(self, room: Room) -> int:
        """Return how many boxes stand on targets."""
        return len(self.boxes & room.targets)

    def solved(self, room: Room) -> bool:
        """Whether every box stands on a target."""
        return self.boxes <= room.targets


@dataclass(frozen=True)
class Move:
    """What one move did: the new state, and whether the player moved and a box was pushed."""

    state: State
    moved: bool
    pushed: bool
    box_from: int | None = None
    box_to: int | None = None


def apply_move(room: Room, state: State, direction: str) -> Move:
    """Apply one move with push semantics; a blocked move returns ``state`` unchanged."""
    step = room.offset(direction)
    ahead = state.player + step
    if room.is_wall(ahead):
        return Move(state, moved=False, pushed=False)
    if ahead not in state.boxes:
        return Move(State(ahead, state.boxes), moved=True, pushed=False)
    beyond = ahead + step
    if room.is_wall(beyond) or beyond in state.boxes:
        return Move(state, moved=False, pushed=False)
    boxes = (state.boxes - {ahead}) | {beyond}
    return Move(State(ahead, boxes), moved=True, pushed=True, box_from=ahead, box_to=beyond)


def render_grid(room: Room, state: State) -> str:
    """Return the room as text rows in the legend's symbols."""
    rows = []
    for row in range(room.height):
        cells = []
        for column in range(room.width):
            cell = row * room.width + column
            on_target = cell in room.targets
            if cell not in room.floor:
                cells.append(WALL)
            elif cell == state.player:
                cells.append(PLAYER_ON_TARGET if on_target else PLAYER)
            elif cell in state.boxes:
                cells.append(BOX_ON_TARGET if on_target else BOX)
            else:
                cells.append(TARGET if on_target else FLOOR)
        rows.append("".join(cells))
    return "\n".join(rows)


def describe_positions(room: Room, state: State) -> str:
    """Return where each box and each free target is from the player, in the moves' words.

    One line per box (``Box at row 3, column 2: 1 down and 1 left of you.``), then one per
    target without a box. A grid row's cells merge into multi-character tokens (``#__#``), so
    a small model cannot read a cell's column off the grid; these lines state it.
    """
    player_row, player_column = room.position(state.player)
    lines = [f"You are at row {player_row}, column {player_column}."]
    for name, cells in (
        ("Box", sorted(state.boxes)),
        ("Empty target", sorted(room.targets - state.boxes)),
    ):
        for cell in cells:
            row, column = room.position(cell)
            lines.append(
                f"{name} at row {row}, column {column}: "
                f"{_offset_words(row - player_row, column - player_column)}."
            )
    return "\n".join(lines)


def _offset_words(rows: int, columns: int) -> str:
    parts = []
    if rows:
        parts.append(f"{abs(rows)} {'down' if rows > 0 else 'up'}")
    if columns:
        parts.append(f"{abs(columns)} {'right' if columns > 0 else 'left'}")
    return " and ".join(parts) + " of you" if parts else "where you are"


def parse_grid(text: str) -> tuple[Room, State]:
    """Parse the first block of grid rows in ``text`` (other lines are ignored).

    Raises :class:`GridError` unless the rows are equally long, walled on the border, hold
    exactly one player, and have as many targets as boxes.
    """
    rows: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line and set(line) <= GRID_SYMBOLS and WALL in line:
            rows.append(line)
        elif rows:
            break
    if not rows:
        raise GridError("no grid rows found")
    width, height = len(rows[0]), len(rows)
    if any(len(r) != width for r in rows):
        raise GridError("grid rows differ in length")
    floor, targets, boxes, players = set(), set(), set(), []
    for r, line in enumerate(rows):
        for c, symbol in enumerate(line):
            cell = r * width + c
            if symbol == WALL:
                continue
            if r in (0, height - 1) or c in (0, width - 1):
                raise GridError(f"border cell ({r}, {c}) is not a wall")
            floor.add(cell)
            if symbol in (TARGET, BOX_ON_TARGET, PLAYER_ON_TARGET):
                targets.add(cell)
            if symbol in (BOX, BOX_ON_TARGET):
                boxes.add(cell)
            if symbol in (PLAYER, PLAYER_ON_TARGET):
                players.append(cell)
    if len(players) != 1:
        raise GridError(f"expected one player, found {len(players)}")
    if len(boxes) != len(targets) or not boxes:
        raise GridError(
            f"expected as many targets as boxes (>0), found {len(targets)}/{len(boxes)}"
        )
    room = Room(width, height, frozenset(floor), frozenset(targets))
    return room, State(players[0], frozenset(boxes))
