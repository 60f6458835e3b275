"""``HumanAgent``: a person plays in the terminal, recorded exactly like a model.

The agent itself does no terminal I/O: it asks an injected ``ask(state) -> str`` function (the
CLI supplies one that shows the page and reads a line), so the library never prints. Typed
shortcuts are expanded: a number picks that admissible action, a bare word picks the matching
``click[...]``, and on a search page plain text becomes ``search[text]``. Picking the search box
itself (its number, or ``search``) carries no words: :func:`picks_search_box` tells the CLI to
ask for them rather than send the placeholder ``search[<query>]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skillrl.agent import AgentDecision, AgentState
from skillrl.parsing import is_search_page, parse_action

Ask = Callable[[AgentState], str]


class HumanAgent:
    """Actions typed by a person (one episode at a time is what a person can follow)."""

    name = "human"

    def __init__(self, ask: Ask, *, uses_skills: bool = True) -> None:
        self.ask = ask
        self.uses_skills = uses_skills
        """Skills are still retrieved and shown, so a person can see what a model would get."""

    def begin_episode(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        """Nothing to set up."""

    def end_episode(self, episode_id: str) -> None:
        """Nothing to tear down."""

    def act(self, states: list[AgentState]) -> list[AgentDecision]:
        """Ask the person once per state."""
        decisions = []
        for state in states:
            typed = self.ask(state).strip()
            action = expand_typed_action(typed, state.available_actions)
            parsed = parse_action(action, state.available_actions)
            decisions.append(
                AgentDecision(action=parsed.action, model_output=typed, parse_ok=parsed.ok)
            )
        return decisions


def expand_typed_action(typed: str, available_actions: list[str]) -> str:
    """Turn a person's shorthand into an action string (unchanged if it already is one)."""
    text = typed.strip()
    lowered = text.lower()
    if lowered.startswith(("search[", "click[")):
        return text
    if text.isdigit() and 1 <= int(text) <= len(available_actions):
        return available_actions[int(text) - 1]
    if is_search_page(available_actions):
        return f"search[{text}]"
    return f"click[{lowered}]"


def picks_search_box(typed: str, available_actions: list[str]) -> bool:
    """Whether a person chose the search box itself (its number or ``search``), not words."""
    if not is_search_page(available_actions):
        return False
    text = typed.strip().lower()
    if text.isdigit() and 1 <= int(text) <= len(available_actions):
        return available_actions[int(text) - 1].startswith("search[")
    return text in ("search", "search[]", "search[<query>]")
