"""Split a WebShop command the way its text environment does (pure; returns a new object)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """An action's name (``search``/``click``/anything) and its lowercased argument, if any."""

    name: str
    arg: str | None


def split_command(action: str) -> Command:
    r"""Split ``name[arg]``; text without brackets is a name with no argument.

    Accepts exactly what upstream's ``re.match(r"(.+)\[(.+)\]", action)`` accepts, with the same
    groups, but in linear time: that backtracking pattern is quadratic on long bracket runs
    (``"click" + "[" * 40000`` took seconds). Its greedy first group ends at the last ``[`` that
    still leaves one character and a ``]`` after it, the second group ends at the last ``]``,
    and ``.`` stops at a newline, so only the first line counts.

    Departure: surrounding whitespace is stripped first (models often add a newline); upstream
    would treat `` click[x]`` as an unknown action name.
    """
    text = action.strip() if isinstance(action, str) else ""
    line = text.split("\n", 1)[0]
    close = line.rfind("]")
    # The name needs at least one character before "[", the argument one before "]".
    open_ = line.rfind("[", 1, close - 1) if close >= 3 else -1
    if open_ < 1:
        return Command(name=text, arg=None)
    return Command(name=line[:open_], arg=line[open_ + 1 : close].lower())
