"""``ExpertAgent``: the scripted WebShop expert behind the :class:`skillrl.agent.Agent` contract.

One :class:`envs.webshop.expert.WebShopExpert` per active episode; it reads only each turn's
observation and info plus the goal in the reset info, so its episodes are recorded exactly like
a model's (and seed the first skill bank).
"""

from __future__ import annotations

from typing import Any

from envs.webshop.expert import WebShopExpert
from skillrl.agent import AgentDecision, AgentState
from skillrl_core.errors import ConfigError


class ExpertAgent:
    """Plays WebShop episodes with the scripted expert (no model, no skills)."""

    name = "expert"
    uses_skills = False

    def __init__(self, max_turns: int = 15) -> None:
        if max_turns < 1:
            raise ConfigError(f"max_turns ({max_turns}) must be at least 1")
        self.max_turns = max_turns
        self._experts: dict[str, WebShopExpert] = {}

    def begin_episode(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        """Start an expert for ``episode_id``; ``reset_info`` must carry the WebShop ``goal``."""
        if "goal" not in reset_info:
            raise ConfigError(
                "the expert agent needs the WebShop goal in the reset info (only webshop has one)"
            )
        expert = WebShopExpert(max_turns=self.max_turns)
        expert.reset(reset_info)
        self._experts[episode_id] = expert

    def act(self, states: list[AgentState]) -> list[AgentDecision]:
        """Return the expert's action for each active episode."""
        decisions = []
        for state in states:
            expert = self._experts.get(state.episode_id)
            if expert is None:
                raise ConfigError(f"episode {state.episode_id!r} was never begun")
            info = {"available_actions": state.available_actions, **state.info}
            action = expert.act(state.observation, info)
            decisions.append(AgentDecision(action=action, model_output=action))
        return decisions

    def end_episode(self, episode_id: str) -> None:
        """Forget the episode's expert."""
        self._experts.pop(episode_id, None)
