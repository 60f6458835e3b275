"""``ExpertAgent``: an environment's scripted expert behind the agent contract.

One expert per active episode, made by the environment's adapter (``make_expert``); it reads only
each turn's observation and info plus the reset info, so its episodes are recorded exactly like
a model's (and seed the first skill bank). The environment is known from the first turn's state,
so one agent plays episodes of any environment that has an expert.
"""

from __future__ import annotations

import copy
from typing import Any

import envs
from envs.adapter import Expert
from skillrl.agents.base import AgentDecision, AgentState
from skillrl_core.errors import ConfigError


class EpisodeExperts:
    """One scripted expert per active episode, made on its first state (the env is known then).

    Shared by :class:`ExpertAgent` (the expert acts) and the DAgger labeller (the expert labels
    the states a learner reaches).
    """

    def __init__(self, max_turns: int = 15) -> None:
        if max_turns < 1:
            raise ConfigError(f"max_turns ({max_turns}) must be at least 1")
        self.max_turns = max_turns
        self._reset_info: dict[str, dict[str, Any]] = {}
        self._experts: dict[str, Expert] = {}

    def begin(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        """Remember an episode's reset info (what its expert is reset with)."""
        self._reset_info[episode_id] = dict(reset_info)

    def expert_for(self, state: AgentState) -> Expert:
        """Return the expert of ``state``'s episode, making it on the episode's first state."""
        expert = self._experts.get(state.episode_id)
        if expert is not None:
            return expert
        reset_info = self._reset_info.get(state.episode_id)
        if reset_info is None:
            raise ConfigError(f"episode {state.episode_id!r} was never begun")
        expert = envs.adapter_for(state.env_id).make_expert(self.max_turns)
        if expert is None:
            raise ConfigError(f"environment {state.env_id!r} has no scripted expert")
        expert.reset(reset_info)
        self._experts[state.episode_id] = expert
        return expert

    def started(self, episode_id: str) -> Expert | None:
        """Return the episode's expert if it was made already."""
        return self._experts.get(episode_id)

    def end(self, episode_id: str) -> None:
        """Forget an episode and its expert."""
        self._experts.pop(episode_id, None)
        self._reset_info.pop(episode_id, None)


def expert_info(state: AgentState) -> dict[str, Any]:
    """Return the info an expert reads at ``state``.

    That is the turn's info and admissible actions, and ``case_titles``: the prompt lines of the
    cases retrieved for this turn (what a policy reading the same prompt could act on; an expert
    may use them, as a labeller should).
    """
    info = {"available_actions": state.available_actions, **state.info}
    if state.skills is not None and state.skills.cases:
        info["case_titles"] = [r.entry.title for r in state.skills.cases]
    return info


class ExpertAgent:
    """Plays episodes with the environment's scripted expert (no model, no skills)."""

    name = "expert"
    uses_skills = False

    def __init__(self, max_turns: int = 15) -> None:
        self.experts = EpisodeExperts(max_turns)

    @property
    def max_turns(self) -> int:
        """The turn limit the experts plan for."""
        return self.experts.max_turns

    def begin_episode(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        """Remember the reset info; the expert is made on the first turn (its env is known then)."""
        self.experts.begin(episode_id, reset_info)

    def act(self, states: list[AgentState]) -> list[AgentDecision]:
        """Return the expert's action for each active episode."""
        decisions = []
        for state in states:
            action = self.experts.expert_for(state).act(state.observation, expert_info(state))
            decisions.append(AgentDecision(action=action, model_output=action))
        return decisions

    def peek(self, states: list[AgentState]) -> list[AgentDecision]:
        """Return what the expert would do in each state, its episodes' memory left as it was.

        Each state is played by a copy of its episode's expert (acting updates what an expert
        remembers), so a state can be asked about twice, e.g. with other entries.
        """
        decisions = []
        for state in states:
            expert = copy.deepcopy(self.experts.expert_for(state))
            action = expert.act(state.observation, expert_info(state))
            decisions.append(AgentDecision(action=action, model_output=action))
        return decisions

    def end_episode(self, episode_id: str) -> None:
        """Forget the episode's expert."""
        self.experts.end(episode_id)
