"""Lenient parsing of model output into an environment action (a pure function).

The expected format is ``<think>...</think><action>...</action>``. Small models drift from it, so
the parser also accepts an unclosed ``<action>``, a bare ``search[...]`` / ``click[...]`` anywhere
in the text, any case of the verb, and a click whose target differs from an admissible one only by
case or surrounding spaces. Anything else is an invalid action: reported, never raised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_THINK = re.compile(r"<think>(.*?)(?:</think>|<action>|$)", re.DOTALL | re.IGNORECASE)
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
    think_match = _THINK.search(text)
    think = think_match.group(1).strip() if think_match else ""
    tag = _ACTION_TAG.search(text)
    region = tag.group(1) if tag else text
    command = _COMMAND.search(region) or (_COMMAND.search(text) if tag else None)
    if command is None:
        raw = region.strip()[:200]
        return ParsedAction(raw, think, False, "no search[...] or click[...] action found")
    verb, argument = command.group(1).lower(), " ".join(command.group(2).split())
    return _check(verb, argument, think, available_actions)


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
