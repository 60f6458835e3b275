"""``SokobanConfig``: every knob of the Sokoban environment, validated on construction."""

from __future__ import annotations

import re
from dataclasses import dataclass

from skillrl_core.errors import ConfigError
from skillrl_core.validation import check_number

DEFAULT_CATEGORIES: tuple[str, ...] = ("6x6-1box", "7x7-2box", "8x8-3box")
"""RAGEN's 6x6 room with one box, then one size and one box more per step of difficulty."""

OBSERVATION_MODES: tuple[str, ...] = ("grid", "positions")
"""What an observation holds (:attr:`SokobanConfig.observation_mode`)."""

ROOM_FIELDS: tuple[str, ...] = (
    "categories",
    "seed",
    "rooms_per_category",
    "test_rooms",
    "eval_rooms",
    "min_solution_moves",
    "max_solution_moves",
    "reverse_steps",
)
"""The fields that decide which rooms exist and how they split (the room cache's key)."""

_CATEGORY = re.compile(r"^(\d{1,2})x(\d{1,2})-(\d)box(?:es)?$")
MIN_SIDE, MAX_SIDE, MAX_BOXES = 5, 12, 4
MAX_REVERSE_STEPS = 1_000
"""Longest reverse-play walk: a room costs about 0.15 s at 1,000 steps (8x8, 3 boxes; ten walks
and up to 200 attempts a room), so 10^8 steps hung the first reset."""
MAX_ROOMS_PER_CATEGORY = 1_000_000
"""Most rooms a category may have: the training goals of a run are a shuffled list of them, so
10^12 exhausted memory before the first episode."""


@dataclass(frozen=True)
class Category:
    """A difficulty: room width and height (border walls included) and number of boxes."""

    name: str
    width: int
    height: int
    boxes: int


def parse_category(name: str) -> Category:
    """Parse ``"<width>x<height>-<boxes>box"`` (e.g. ``"7x7-2box"``); raise ConfigError if bad."""
    match = _CATEGORY.match(str(name).strip())
    if match is None:
        raise ConfigError(f"category ({name!r}) must look like '6x6-1box' (width x height - boxes)")
    width, height, boxes = (int(g) for g in match.groups())
    if not (MIN_SIDE <= width <= MAX_SIDE and MIN_SIDE <= height <= MAX_SIDE):
        raise ConfigError(
            f"category ({name!r}): width and height must be {MIN_SIDE}-{MAX_SIDE} (walls included)"
        )
    if not 1 <= boxes <= MAX_BOXES:
        raise ConfigError(f"category ({name!r}): boxes must be 1-{MAX_BOXES}")
    return Category(f"{width}x{height}-{boxes}box", width, height, boxes)


def _require_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} ({value!r}) must be an integer")
    if value < minimum:
        raise ConfigError(f"{name} ({value}) must be at least {minimum}")


@dataclass(frozen=True)
class SokobanConfig:
    """Configuration of :class:`envs.sokoban.env.SokobanEnv` (hashable: it keys the room cache)."""

    categories: tuple[str, ...] | str = DEFAULT_CATEGORIES
    """Difficulties to play, ``<width>x<height>-<boxes>box`` each (border walls included, as
    gym-sokoban's ``dim_room``); a comma-separated string is accepted too."""
    max_turns: int = 20
    """Turn limit (one move a turn); reaching it unsolved ends the episode with ``truncated``."""
    seed: int = 0
    """Master seed: room ``i`` of a category is generated from ``(seed, category, i)``."""
    rooms_per_category: int = 10_000
    """Rooms per category (at most 1,000,000); rooms are generated on first use."""
    test_rooms: int = 100
    """Rooms ``0 .. test_rooms-1`` of each category form the test split (100: a paired test
    resolves a gain of about 10 rooms)."""
    eval_rooms: int = 50
    """The next ``eval_rooms`` rooms of each category form the eval split; the rest are train
    (from room 150 with the defaults, as when the test split held 50 rooms and eval 100)."""
    min_solution_moves: int = 2
    """Rooms solvable in fewer moves are regenerated (drops one-move rooms)."""
    max_solution_moves: int = 15
    """Rooms whose optimal solution needs more moves are regenerated (keep it <= max_turns so
    that every room can be solved within the turn limit)."""
    reverse_steps: int = 100
    """Length of each random reverse-play walk that pulls the boxes off their targets (at most
    1,000)."""
    step_penalty: float = -0.1
    """Reward of every move, blocked or not (gym-sokoban's ``penalty_for_step``)."""
    box_on_target_reward: float = 1.0
    """Reward when a push raises the number of boxes on targets (``reward_box_on_target``)."""
    box_off_target_penalty: float = -1.0
    """Reward when a push lowers it (gym-sokoban's ``penalty_box_off_target``)."""
    solved_reward: float = 10.0
    """Bonus when every box is on a target (gym-sokoban's ``reward_finished``)."""
    show_legend: bool = True
    """Print the symbol legend in every observation."""
    observation_mode: str = "grid"
    """``grid``: the legend, the grid and the box count (RAGEN's text). ``positions``: the same,
    then where each box and free target is from the player (``Box at row 3, column 2: 1 down
    and 1 left of you.``)."""

    def __post_init__(self) -> None:
        raw = self.categories
        if not isinstance(raw, str | list | tuple):
            given = "is empty" if raw is None else f"({raw!r}) is not text"
            raise ConfigError(
                f"categories {given}: give category names such as '6x6-1box,7x7-2box' "
                "(comma-separated)"
            )
        names = raw.split(",") if isinstance(raw, str) else list(raw)
        parsed = tuple(parse_category(n).name for n in names if str(n).strip())
        if not parsed:
            raise ConfigError(f"categories ({raw!r}) must name at least one category")
        if len(set(parsed)) != len(parsed):
            raise ConfigError(f"categories ({raw!r}) name a category twice")
        object.__setattr__(self, "categories", parsed)
        for name in ("max_turns", "rooms_per_category", "min_solution_moves", "reverse_steps"):
            _require_int(name, getattr(self, name), 1)
        for name in ("seed", "test_rooms", "eval_rooms"):
            _require_int(name, getattr(self, name), 0)
        _require_int("max_solution_moves", self.max_solution_moves, self.min_solution_moves)
        for name, most in (
            ("reverse_steps", MAX_REVERSE_STEPS),
            ("rooms_per_category", MAX_ROOMS_PER_CATEGORY),
        ):
            if getattr(self, name) > most:
                raise ConfigError(f"{name} ({getattr(self, name)}) must be at most {most:,}")
        if self.test_rooms + self.eval_rooms >= self.rooms_per_category:
            raise ConfigError(
                f"test_rooms ({self.test_rooms}) + eval_rooms ({self.eval_rooms}) must be less "
                f"than rooms_per_category ({self.rooms_per_category}) to leave train rooms"
            )
        for name in ("step_penalty", "box_on_target_reward", "box_off_target_penalty",
                     "solved_reward"):  # fmt: skip
            self._require_float(name)
        if not isinstance(self.show_legend, bool):
            raise ConfigError(f"show_legend ({self.show_legend!r}) must be true or false")
        if self.observation_mode not in OBSERVATION_MODES:
            raise ConfigError(
                f"observation_mode ({self.observation_mode!r}) must be one of "
                f"{', '.join(OBSERVATION_MODES)}"
            )

    def _require_float(self, name: str) -> None:
        value = getattr(self, name)
        check_number(name, value)
        object.__setattr__(self, name, float(value))

    @property
    def category_specs(self) -> tuple[Category, ...]:
        """The parsed categories, in configured order."""
        return tuple(parse_category(n) for n in self.categories)

    @property
    def room_key(self) -> tuple[tuple[str, object], ...]:
        """The fields that decide the rooms and splits, as ``(name, value)`` pairs, for caching."""
        return tuple((name, getattr(self, name)) for name in ROOM_FIELDS)
