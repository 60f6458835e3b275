"""Sokoban action parsing: a pure function from text to one of the four moves (or None).

Accepted: ``up``, ``down``, ``left``, ``right`` in any letter case, with surrounding spaces, and
optionally prefixed by ``push`` or ``move`` (gym-sokoban's action names; both mean the same move
here, as in RAGEN, where every move pushes a box it walks into). Anything else is None. Only
ASCII letters count, so look-alike Unicode letters (the long s, the Kelvin sign) never match.
"""

from __future__ import annotations

import re

from envs.sokoban.room import DIRECTIONS

_MOVE = re.compile(r"\s*(?:(?:push|move)\s+)?(up|down|left|right)\s*", re.IGNORECASE | re.ASCII)


def parse_move(action: object) -> str | None:
    """Return the move ``action`` names (``up|down|left|right``), or None if it names none."""
    if not isinstance(action, str) or len(action) > 64:
        return None
    match = _MOVE.fullmatch(action)
    if match is None:
        return None
    move = match.group(1).lower()
    return move if move in DIRECTIONS else None
