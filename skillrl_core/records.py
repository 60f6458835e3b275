"""Typed records of what happened in an episode: one :class:`TurnRecord` per turn.

These are the unit of exchange between the rollout engine (writes them), the skill bank's
trajectory store (persists them with ``dataclasses.asdict``), the distiller (reads them) and the
trainer (reads token ids and log-probs from them).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TurnRecord:
    """One turn: what the agent saw, what it retrieved, what it said and did, what it got."""

    turn: int
    """0-based turn index within the episode."""
    observation: str
    """The observation the agent acted on."""
    available_actions: list[str]
    """Admissible actions at that observation."""
    action: str
    """The action sent to the environment (after parsing)."""
    action_valid: bool
    """Whether the action was parsable and admissible (the environment's ``action_valid``)."""
    reward: float
    """The environment's reward for this step (before any trainer shaping)."""
    terminated: bool = False
    """The episode ended inside the task after this action."""
    truncated: bool = False
    """The turn limit ended the episode after this action."""
    model_output: str = ""
    """Raw text the policy produced (empty for scripted agents)."""
    retrieved_ids: list[str] = field(default_factory=list)
    """Ids of the skill-bank entries put in this turn's prompt."""
    left_out_ids: list[str] | None = None
    """Ids of entries retrieved for this turn that the prompt left out (its token budget or
    its skill cap cut them), in retrieval order; None in records written before this was kept."""
    prompt_tokens: int = 0
    """Tokens in the prompt (0 when the agent has no tokenizer)."""
    completion_tokens: int = 0
    """Tokens the policy generated."""
    prompt_token_ids: list[int] | None = None
    """Prompt token ids (kept for training; ``None`` when not recorded)."""
    completion_token_ids: list[int] | None = None
    """Generated token ids (the only tokens the GRPO loss trains on)."""
    completion_logprobs: list[float] | None = None
    """Log-probs of the generated tokens under the rollout policy ("old" log-probs)."""
    token_counts: dict[str, int] = field(default_factory=dict)
    """Prompt tokens per part (task, observation, actions, history, skills)."""
    candidate_scores: dict[str, float] | None = None
    """Under constrained decoding: each admissible action the policy scored, with the score it
    was ranked by (the higher, the likelier under greedy play); None when the turn was not
    decoded by scoring candidates (free text, a scripted agent, or a record written before)."""
    action_substituted: bool = False
    """The executed ``action`` is not the one the completion tokens wrote (constrained decoding
    repaired an unusable query, or a person overrode it): trainers leave the turn out of the
    loss, since its tokens did not earn its reward."""
    info: dict[str, Any] = field(default_factory=dict)
    """Extra step info from the environment (JSON-serialisable)."""


@dataclass
class EpisodeRecord:
    """A finished (or truncated) episode."""

    env_id: str
    goal_id: str
    instruction: str
    category: str
    turns: list[TurnRecord] = field(default_factory=list)
    success: bool = False
    """The environment's ``info["success"]`` at the end."""
    score: float = 0.0
    """The final task reward (WebShop: the purchase reward in [0, 1]; 0 if never bought)."""
    reward_breakdown: dict[str, Any] | None = None
    """The environment's explanation of ``score`` (None if the episode never finished)."""
    split: str = ""
    seed: int | None = None
    group_id: str | None = None
    """Episodes rolled out from the same start for GRPO share a group id."""
    agent: str = ""
    """Which agent/policy produced it (e.g. ``expert``, ``transformers:<model>``)."""
    skills_enabled: bool = True
    error: str = ""
    """Why the episode was cut short by a failure outside the agent (empty when it was not)."""
    episode_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def group(self) -> str:
        """The GRPO group: ``group_id``, or the episode's own id (a group of one) without one."""
        return self.group_id if self.group_id is not None else self.episode_id

    @property
    def num_turns(self) -> int:
        """Number of turns taken."""
        return len(self.turns)

    @property
    def invalid_actions(self) -> int:
        """Number of turns whose action was invalid."""
        return sum(not t.action_valid for t in self.turns)

    def to_dict(self) -> dict[str, Any]:
        """Serialise to plain JSON-able data."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeRecord:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        turns = [TurnRecord(**t) for t in data.pop("turns", [])]
        return cls(turns=turns, **data)
