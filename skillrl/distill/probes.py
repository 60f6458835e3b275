"""Deliberately faulty experts: real failed episodes, with real reward breakdowns, on demand.

A starting bank distilled only from the scripted expert's successes would have no counterfactual
notes. :class:`FaultyExpertAgent` plays like the expert but makes one typical mistake per episode
at the moment it matters (on the product page, where the expert would click a requested option):

- ``wrong_option``: clicks a neighbouring value instead (a size M for an L);
- ``skip_option``: clicks Buy Now instead, leaving the option unselected;
- ``hasty_buy``: on the results page opens another result than the expert would, and buys it at
  once (wrong type, missed attributes, over the price bound: whatever that product gets wrong).

The environment then judges the purchase as usual, and the analytic distiller turns the
breakdown into a precise note, exactly as it would for a model's mistake.
"""

from __future__ import annotations

from typing import Any

from skillrl.agent import AgentDecision, AgentState
from skillrl.agents.expert import ExpertAgent
from skillrl.distill.trajectory import BUY, NAVIGATION, split_action
from skillrl_core.errors import ConfigError

FAULTS: tuple[str, ...] = ("wrong_option", "skip_option", "hasty_buy")


def _is_product(action: str) -> bool:
    verb, target = split_action(action)
    return verb == "click" and len(target) == 10 and target.startswith("b0")


def _is_option(action: str) -> bool:
    verb, target = split_action(action)
    return (
        verb == "click" and target not in NAVIGATION and target != BUY and not _is_product(action)
    )


def faulty_action(action: str, available: list[str], fault: str) -> str | None:
    """Return the mistaken replacement of the option click ``action`` (None if impossible)."""
    if fault == "hasty_buy":
        others = [a for a in available if _is_product(a) and a != action]
        return others[-1] if others else None
    if fault == "skip_option":
        buy = f"click[{BUY}]"
        return buy if buy in available else None
    options = [a for a in available if _is_option(a)]
    if action not in options or len(options) < 2:
        return None
    position = options.index(action)
    # The neighbour in page order is most often another value of the same option.
    return options[position + 1] if position + 1 < len(options) else options[position - 1]


class FaultyExpertAgent:
    """The WebShop expert with one injected mistake per episode (see the module docstring)."""

    uses_skills = False

    def __init__(self, fault: str, max_turns: int = 15) -> None:
        if fault not in FAULTS:
            raise ConfigError(f"fault ({fault!r}) must be one of {', '.join(FAULTS)}")
        self.fault = fault
        self.name = f"expert+{fault}"
        self._expert = ExpertAgent(max_turns=max_turns)
        self._done: set[str] = set()

    def begin_episode(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        """Start the wrapped expert for ``episode_id``."""
        self._expert.begin_episode(episode_id, reset_info)

    def act(self, states: list[AgentState]) -> list[AgentDecision]:
        """Return the expert's decisions, with the first chance of each episode spoiled."""
        decisions = self._expert.act(states)
        spoils = _is_product if self.fault == "hasty_buy" else _is_option
        buy = f"click[{BUY}]"
        for state, decision in zip(states, decisions, strict=True):
            if state.episode_id in self._done:
                if self.fault == "hasty_buy" and buy in state.available_actions:
                    decision.action = decision.model_output = buy
                continue
            if not spoils(decision.action):
                continue
            wrong = faulty_action(decision.action, state.available_actions, self.fault)
            if wrong is not None:
                self._done.add(state.episode_id)
                decision.action = decision.model_output = wrong
        return decisions

    def end_episode(self, episode_id: str) -> None:
        """Forget the episode."""
        self._expert.end_episode(episode_id)
        self._done.discard(episode_id)
