"""Lenient parsing of model output into an environment action (a pure function).

The expected format is ``<think>...</think><action>...</action>``. Small models drift from it, so
the parser also accepts an unclosed ``<action>``, a bare ``search[...]`` / ``click[...]`` anywhere
in the text, any case of the verb, and a click whose target differs from an admissible one only by
case or surrounding spaces. Anything else is an invalid action: reported, never raised.

Actions written inside ``<think>`` are thoughts, not actions (``<think>do not click[buy now]
yet</think> click[back to search]`` is the back click). A ``<think>`` block ends at
``</think>``, at an ``<action>`` tag, or at the end of the text when it is never closed; text
before a ``</think>`` that has no opening tag (chat templates often open it in the prompt) is
thinking too. The text is scanned with ``str``/regex searches that each move forward, so parsing
takes linear time on any input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_THINK_END = re.compile(r"</think>|<action>", re.IGNORECASE)
_ACTION_TAG = re.compile(r"<action>(.*?)(?:</action>|$)", re.DOTALL | re.IGNORECASE)
_COMMAND = re.compile(r"\b(search|click)\s*\[([^\[\]]*)\]?", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedAction:
    """What was read from one model output."""

    action: str
    """The normalised action (``search[...]``/``click[...]``), or the raw action text if none."""
    think: str
    """The reasoning text (empty if none)."""
    ok: bool
    """Whether an action of the right shape was found and is admissible."""
    error: str = ""
    """Why it is not ok (empty when ok)."""


def parse_action(text: str, available_actions: list[str]) -> ParsedAction:
    """Read the action in ``text`` and check it against ``available_actions``."""
    think, rest = split_thinking(text)
    tag = _ACTION_TAG.search(rest)
    region = tag.group(1) if tag else rest
    command = _COMMAND.search(region) or (_COMMAND.search(rest) if tag else None)
    if command is None:
        raw = region.strip()[:200]
        return ParsedAction(raw, think, False, "no search[...] or click[...] action found")
    verb, argument = command.group(1).lower(), " ".join(command.group(2).split())
    return _check(verb, argument, think, available_actions)


def split_thinking(text: str) -> tuple[str, str]:
    """Return ``(thinking, everything else)``: the think blocks' text and the text around them."""
    thoughts: list[str] = []
    outside: list[str] = []
    position = 0
    first_open = _THINK_OPEN.search(text)
    stray_close = _THINK_CLOSE.search(text, 0, first_open.start() if first_open else len(text))
    if stray_close is not None:
        thoughts.append(text[: stray_close.start()])
        position = stray_close.end()
    while True:
        opened = _THINK_OPEN.search(text, position)
        if opened is None:
            outside.append(text[position:])
            break
        outside.append(text[position : opened.start()])
        end = _THINK_END.search(text, opened.end())
        if end is None:  # never closed: the rest is thinking
            thoughts.append(text[opened.end() :])
            break
        thoughts.append(text[opened.end() : end.start()])
        # An <action> tag ends the thought but belongs to the action that follows.
        position = end.end() if end.group(0).lower() == "</think>" else end.start()
    think = "\n".join(t.strip() for t in thoughts if t.strip())
    return think, " ".join(outside)


def _check(verb: str, argument: str, think: str, available: list[str]) -> ParsedAction:
    action = f"{verb}[{argument}]"
    if verb == "search":
        if not any(a.startswith("search[") for a in available):
            return ParsedAction(action, think, False, "search is not available on this page")
        if not argument or argument == "<query>":
            return ParsedAction(action, think, False, "empty search query")
        return ParsedAction(action, think, True)
    wanted = argument.lower()
    for candidate in available:
        if candidate.lower() == f"click[{wanted}]":
            return ParsedAction(candidate, think, True)
    return ParsedAction(action, think, False, f"{action} is not among the admissible actions")


def is_search_page(available_actions: list[str]) -> bool:
    """Whether the only admissible action is a free-text search."""
    return bool(available_actions) and all(a.startswith("search[") for a in available_actions)
