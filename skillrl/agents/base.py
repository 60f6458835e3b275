"""The agent contract the rollout engine drives: batched, per-turn, skill-aware.

An :class:`Agent` decides actions for many episodes at once. The LLM agent builds one prompt per
episode (task, observation, admissible actions, recent turns, this turn's retrieved skills) and
runs one batched generation; scripted agents (the WebShop expert, a person at the terminal)
implement the same contract so that their episodes are recorded the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from memory.types import RetrievedSkills
from skillrl_core.records import TurnRecord


@dataclass
class AgentState:
    """What an agent may see of one active episode at one turn."""

    episode_id: str
    env_id: str
    instruction: str
    category: str
    observation: str
    available_actions: list[str]
    turn: int
    history: list[TurnRecord] = field(default_factory=list)
    """Earlier turns of this episode, oldest first."""
    skills: RetrievedSkills | None = None
    """Entries retrieved for this turn (None when skills are off)."""
    info: dict[str, Any] = field(default_factory=dict)
    """The environment's latest ``info``."""


@dataclass
class AgentDecision:
    """An agent's decision for one episode at one turn."""

    action: str
    """The action to send to the environment (already parsed from the model output)."""
    model_output: str = ""
    parse_ok: bool = True
    """False when the output could not be parsed into an action (recorded, not raised)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None
    token_counts: dict[str, int] = field(default_factory=dict)
    skill_ids: list[str] | None = None
    """Ids of the retrieved skills that made it into the prompt (None: all of ``state.skills``)."""
    candidate_scores: dict[str, float] | None = None
    """Under constrained decoding: each admissible action the policy scored, with the score it
    was ranked by (mean or summed log-prob of its tokens); None when no candidates were scored."""
    action_substituted: bool = False
    """``action`` is not what the recorded completion tokens wrote (a repaired query, a person's
    override): the turn is kept out of the training loss."""


@runtime_checkable
class Agent(Protocol):
    """Decides actions for a batch of active episodes."""

    name: str
    uses_skills: bool
    """Whether the engine should retrieve skills for this agent each turn."""

    def begin_episode(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        """Prepare for a new episode (``reset_info`` is the env's reset info)."""
        ...

    def act(self, states: list[AgentState]) -> list[AgentDecision]:
        """Return one decision per state, in order."""
        ...

    def end_episode(self, episode_id: str) -> None:
        """Forget an episode that ended (terminated or truncated)."""
        ...
