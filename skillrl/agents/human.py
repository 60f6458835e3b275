"""``HumanAgent``: a person plays in the terminal, recorded exactly like a model.

The agent itself does no terminal I/O: it asks an injected ``ask(state) -> str`` function (the
CLI supplies one that shows the page and reads a line), so the library never prints. Typed
shorthand (a number from the list, a word) is expanded by the environment's adapter
(:meth:`envs.adapter.HumanPlay.expand_typed`) and read with its grammar, so a person plays
every registered environment the same way. Picking a free-text box itself carries no words:
:meth:`~envs.adapter.HumanPlay.wants_free_text` tells the CLI to ask for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import envs
from skillrl.agents.base import AgentDecision, AgentState
from skillrl.parsing import ParsedAction, parse_action

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
            parsed = read_typed_action(typed, state)
            decisions.append(
                AgentDecision(action=parsed.action, model_output=typed, parse_ok=parsed.ok)
            )
        return decisions


def read_typed_action(typed: str, state: AgentState) -> ParsedAction:
    """Expand a person's shorthand with the environment's adapter and read the action."""
    adapter = envs.adapter_for(state.env_id)
    action = adapter.expand_typed(typed, state.available_actions)
    return parse_action(action, state.available_actions, adapter)
