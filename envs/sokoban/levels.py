"""Sokoban goals (one generated room each) and the fixed test/eval/train splits.

Room ``i`` of a category is generated from the string seed ``"<seed>:<category>:<i>"``, so it
never depends on which other rooms were generated or in which order. Per category, rooms
``0 .. test_rooms-1`` are test, the next ``eval_rooms`` are eval, the rest train.

A split interleaves the categories: position ``p`` of a split is room ``p // k`` (within that
split) of category ``p % k``, for ``k`` categories; so the first ``n`` goals of a split are
balanced across difficulties. ``goal_index`` in reset infos counts over all goals, test first,
then eval, then train (as WebShop's does).

Rooms are generated on first use and kept (a few milliseconds each); every env built with the
same room settings shares one :class:`LevelSet`.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from envs.sokoban.config import Category, SokobanConfig
from envs.sokoban.generate import Puzzle, generate_puzzle
from envs.sokoban.room import GridError, parse_grid, render_grid
from envs.sokoban.solver import solve
from skillrl_core.errors import ConfigError

SPLITS: tuple[str, ...] = ("test", "eval", "train")
_GOAL_ID = re.compile(r"^(.+)-(\d+)$")


@dataclass(frozen=True)
class Level:
    """One goal: a generated room, where it sits in the splits, and its stable id."""

    goal_id: str
    category: Category
    room_number: int
    """Index of the room within its category (0-based, over all splits)."""
    split: str
    goal_index: int
    """Index over all goals (test positions first, then eval, then train)."""
    puzzle: Puzzle

    def public(self) -> dict[str, Any]:
        """Return what an agent may know about the goal beyond the grid (not the solution)."""
        return {
            "category": self.category.name,
            "width": self.category.width,
            "height": self.category.height,
            "boxes": self.category.boxes,
            "optimal_moves": self.puzzle.optimal_moves,
        }


class LevelSet:
    """The rooms and splits of one room configuration."""

    def __init__(self, config: SokobanConfig) -> None:
        self.config = config
        self.categories = config.category_specs
        self._by_name = {c.name: c for c in self.categories}
        self._puzzle = lru_cache(maxsize=50_000)(self._generate)

    # -- split arithmetic ------------------------------------------------------------------
    def _range(self, split: str) -> tuple[int, int]:
        """Room numbers ``[start, stop)`` of ``split`` within each category."""
        test, evals = self.config.test_rooms, self.config.eval_rooms
        return {
            "test": (0, test),
            "eval": (test, test + evals),
            "train": (test + evals, self.config.rooms_per_category),
        }[split]

    def split_size(self, split: str) -> int:
        """Return the number of goals in ``split`` (all categories); KeyError if unknown."""
        start, stop = self._range(split)
        return (stop - start) * len(self.categories)

    def _offset(self, split: str) -> int:
        return sum(self.split_size(s) for s in SPLITS[: SPLITS.index(split)])

    def level(self, split: str, position: int) -> Level:
        """Return goal ``position`` of ``split`` (0 <= position < split_size(split))."""
        k = len(self.categories)
        category = self.categories[position % k]
        number = self._range(split)[0] + position // k
        return Level(
            goal_id=f"{category.name}-{number:04d}",
            category=category,
            room_number=number,
            split=split,
            goal_index=self._offset(split) + position,
            puzzle=self._puzzle(category, number),
        )

    def locate(self, goal_id: str) -> tuple[str, int] | None:
        """Return ``(split, position)`` of ``goal_id``, or None if no goal has that id."""
        match = _GOAL_ID.match(goal_id)
        if match is None or match.group(1) not in self._by_name:
            return None
        number = int(match.group(2))
        if f"{match.group(1)}-{number:04d}" != goal_id:
            return None  # one room, one id: "6x6-1box-7" is not "6x6-1box-0007"
        for split in SPLITS:
            start, stop = self._range(split)
            if start <= number < stop:
                k = len(self.categories)
                slot = self.categories.index(self._by_name[match.group(1)])
                return split, (number - start) * k + slot
        return None

    # -- generation ------------------------------------------------------------------------
    def _generate(self, category: Category, number: int) -> Puzzle:
        config = self.config
        rng = random.Random(f"{config.seed}:{category.name}:{number}")
        try:
            return generate_puzzle(
                rng,
                category.width,
                category.height,
                category.boxes,
                reverse_steps=config.reverse_steps,
                min_moves=config.min_solution_moves,
                max_moves=config.max_solution_moves,
            )
        except RuntimeError as error:  # settings no room can meet (e.g. min > what fits)
            raise ConfigError(
                f"category {category.name!r}: {error}; loosen min_solution_moves "
                f"({config.min_solution_moves}) / max_solution_moves "
                f"({config.max_solution_moves})"
            ) from error


def custom_level(grid: str, max_expansions: int = 200_000) -> Level:
    """Return a goal for a hand-made room (``grid`` in the legend's symbols).

    Its id is ``custom-`` and a digest of the grid, its split ``custom``, its goal index -1;
    ``optimal_moves`` is -1 when the solver finds no solution. Raises ConfigError for a grid
    that is not a well-formed room.
    """
    try:
        room, state = parse_grid(grid)
    except GridError as error:
        raise ConfigError(f"room is not a valid Sokoban grid: {error}") from error
    solution = solve(room, state, max_expansions)
    moves = solution.moves if solution is not None else ()
    canonical = render_grid(room, state)
    category = Category(f"{room.width}x{room.height}-{len(state.boxes)}box", room.width,
                        room.height, len(state.boxes))  # fmt: skip
    return Level(
        goal_id="custom-" + hashlib.sha1(canonical.encode()).hexdigest()[:12],
        category=category,
        room_number=-1,
        split="custom",
        goal_index=-1,
        puzzle=Puzzle(room, state, len(moves) if solution is not None else -1, moves),
    )


@lru_cache(maxsize=16)
def _shared(room_key: tuple[tuple[str, object], ...]) -> LevelSet:
    return LevelSet(SokobanConfig(**dict(room_key)))


def shared_levels(config: SokobanConfig) -> LevelSet:
    """Return the :class:`LevelSet` for ``config``'s room settings (one per distinct setting)."""
    return _shared(config.room_key)
