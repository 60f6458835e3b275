"""Parse an action string the way WebShop's text environment does (pure; returns a new object)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Upstream's pattern, matched at the start: "click[x] trailing" still reads as click[x].
_ACTION = re.compile(r"(.+)\[(.+)\]")


@dataclass(frozen=True)
class ParsedAction:
    """An action's name (``search``/``click``/anything) and its lowercased argument, if any."""

    name: str
    arg: str | None


def parse_action(action: str) -> ParsedAction:
    """Split ``name[arg]``; text without brackets is a name with no argument.

    Departure: surrounding whitespace is stripped first (models often add a newline); upstream
    would treat `` click[x]`` as an unknown action name.
    """
    text = action.strip() if isinstance(action, str) else ""
    match = _ACTION.match(text)
    if match is None:
        return ParsedAction(name=text, arg=None)
    name, arg = match.groups()
    return ParsedAction(name=name, arg=arg.lower())
