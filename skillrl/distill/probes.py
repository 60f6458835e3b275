"""Deliberately faulty experts: real failed episodes, with real reward breakdowns, on demand.

A starting bank distilled only from the scripted expert's successes would have no counterfactual
notes. :class:`FaultyExpertAgent` plays like the expert but makes one typical mistake per episode
at the moment it matters; which mistakes exist, and what each one replaces an expert's action
with, is the environment's knowledge (its distill adapter's ``faults`` and ``spoil``).

The environment then judges the episode as usual, and the analytic distiller turns the
breakdown into a precise note, exactly as it would for a model's mistake.
"""

from __future__ import annotations

from typing import Any

from envs import distill_adapter_for
from skillrl.agents.base import AgentDecision, AgentState
from skillrl.agents.expert import ExpertAgent
from skillrl_core.errors import ConfigError


class FaultyExpertAgent:
    """The scripted expert with one injected mistake per episode (see the module docstring)."""

    uses_skills = False

    def __init__(self, fault: str, max_turns: int = 15, *, env_id: str) -> None:
        self._adapter = distill_adapter_for(env_id)
        if fault not in self._adapter.faults:
            known = ", ".join(self._adapter.faults) or "none"
            raise ConfigError(f"fault ({fault!r}) must be one of {known} for {env_id}")
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
        for state, decision in zip(states, decisions, strict=True):
            spoiled = state.episode_id in self._done
            wrong = self._adapter.spoil(
                self.fault, decision.action, state.available_actions, spoiled
            )
            if wrong is not None:
                self._done.add(state.episode_id)
                decision.action = decision.model_output = wrong
        return decisions

    def end_episode(self, episode_id: str) -> None:
        """Forget the episode."""
        self._expert.end_episode(episode_id)
        self._done.discard(episode_id)
