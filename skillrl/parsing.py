"""Lenient parsing of model output into an environment action (a pure function).

The expected format is ``<think>...</think><action>...</action>``. Small models drift from it, so
the envelope is read leniently: an unclosed ``<action>`` counts, and without any ``<action>`` tag
the whole reply outside the thinking is searched. What an action looks like inside it (WebShop's
``search[...]``/``click[...]``, Sokoban's moves) is the environment's grammar, read by its
:class:`envs.adapter.ActionGrammar`. Anything unreadable or inadmissible is an invalid action:
reported, never raised.

Actions written inside ``<think>`` are thoughts, not actions (``<think>do not press A
yet</think> B`` is B). A ``<think>`` block ends at ``</think>``, at an ``<action>`` tag, or at
the end of the text when it is never closed; text before a ``</think>`` that has no opening tag
(chat templates often open it in the prompt) is thinking too. The text is scanned with
``str``/regex searches that each move forward, so the envelope takes linear time on any input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from envs.adapter import ActionGrammar

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_THINK_END = re.compile(r"</think>|<action>", re.IGNORECASE)
_ACTION_TAG = re.compile(r"<action>(.*?)(?:</action>|$)", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class ParsedAction:
    """What was read from one model output."""

    action: str
    """The normalised action, or the raw action text if none was read."""
    think: str
    """The reasoning text (empty if none)."""
    ok: bool
    """Whether an action of the right shape was found and is admissible."""
    error: str = ""
    """Why it is not ok (empty when ok)."""


def parse_action(
    text: str, available_actions: Sequence[str], adapter: ActionGrammar
) -> ParsedAction:
    """Read the action in ``text`` with ``adapter``'s grammar; check it is admissible."""
    think, rest = split_thinking(text)
    tag = _ACTION_TAG.search(rest)
    region = tag.group(1) if tag else rest
    read = adapter.read_action(region, available_actions)
    if read is None and tag:  # an empty or garbled <action>: the action may stand outside it
        read = adapter.read_action(rest, available_actions)
    if read is None:
        raw = region.strip()[:200]
        return ParsedAction(raw, think, False, "no action of this environment's grammar found")
    return ParsedAction(read.action, think, read.ok, read.error)


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
