"""Which goals of a split a command plays: ``N`` (the first N) or ``FIRST-LAST`` (inclusive).

``skillrl run --goals``, ``skillrl eval --goals`` and the benchmarks' ``--eval-goals`` read the
text with :func:`parse_goal_range`, once the split's size is known and before any model loads,
so that ``--goals 250-349`` evaluates goals 250 to 349 of the split and a text that names no
goals of it is refused naming the text and the split's size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from skillrl_core.errors import ConfigError

_FIRST_N = re.compile(r"[0-9]+")
_FIRST_LAST = re.compile(r"([0-9]+)\s*-\s*([0-9]+)")
FORMS = "N (the first N goals) or FIRST-LAST (goals FIRST to LAST, e.g. 250-349)"
"""The accepted texts, as help and error messages say them."""


@dataclass(frozen=True)
class GoalRange:
    """Goals ``first`` to ``last`` (both included) of one split, by index."""

    first: int
    """Index of the first goal (0-based)."""
    last: int
    """Index of the last goal (included)."""

    def __post_init__(self) -> None:
        if self.first < 0 or self.last < self.first:
            raise ConfigError(f"goal range ({self.first}-{self.last}) must have 0 <= first <= last")

    @classmethod
    def first_n(cls, count: int) -> GoalRange:
        """Goals ``0 .. count-1``."""
        if count < 1:
            raise ConfigError(f"goal count ({count}) must be at least 1")
        return cls(0, count - 1)

    @property
    def count(self) -> int:
        """How many goals the range holds."""
        return self.last - self.first + 1

    def indices(self) -> range:
        """Return the goal indices, in order."""
        return range(self.first, self.last + 1)

    def __str__(self) -> str:
        """``FIRST-LAST``: the text :func:`parse_goal_range` reads back as this range."""
        return f"{self.first}-{self.last}"


def parse_goal_range(
    text: str, split_size: int, split: str, *, option: str = "--goals"
) -> GoalRange:
    """Read ``text`` as ``N`` or ``FIRST-LAST`` goals of a split of ``split_size`` goals.

    Raises :class:`ConfigError` naming ``option``, the text and the split's size when the text
    has neither form, names no goal (``0``, ``5-3``) or reaches past the split's last goal.
    """
    stripped = text.strip()
    sizes = f"split {split!r} has {split_size} goals" + (
        f" (0-{split_size - 1})" if split_size > 0 else ""
    )
    first_n, first_last = _FIRST_N.fullmatch(stripped), _FIRST_LAST.fullmatch(stripped)
    if first_n is not None:
        first, last = 0, int(stripped) - 1
        if last < 0:
            raise ConfigError(f"{option} {text!r} names no goal: give at least 1 ({sizes})")
    elif first_last is not None:
        first, last = int(first_last.group(1)), int(first_last.group(2))
        if last < first:
            raise ConfigError(f"{option} {text!r}: FIRST ({first}) is after LAST ({last}); {sizes}")
    else:
        raise ConfigError(f"{option} {text!r} is not {FORMS}; {sizes}")
    if last >= split_size:
        raise ConfigError(f"{option} {text!r} reaches past the split's last goal: {sizes}")
    return GoalRange(first, last)
