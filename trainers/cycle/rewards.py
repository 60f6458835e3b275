"""Turn-level rewards: one float per turn of every episode, from composable reward functions.

A :class:`TurnRewardFn` maps a batch of episodes to per-turn rewards (batched so that a judge
model can score many turns in one call). :func:`compute_turn_rewards` sums the weighted outputs
of several functions. Shipped functions:

- :class:`EnvReward`: the environment's own reward at each turn (WebShop: 0 until the purchase
  score on the buying turn; Sokoban: step cost, box on/off target and the solve bonus);
- :class:`InvalidActionPenalty`: ``-penalty`` on every turn whose action was invalid;
- :class:`TurnCost`: ``-cost`` on every turn, so that finishing in 3 turns beats needing 12;
- :class:`LLMJudgeReward`: a judge model votes YES/NO on each turn, majority vote decides.

TRL's reward functions return one scalar per completion; ours return one value per *turn*, which
is what the step-level (GiGPO) advantages need.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord, TurnRecord
from skillrl_core.validation import check_finite_fields, check_number

if TYPE_CHECKING:
    from skillrl.policies.base import ChatPolicy, SamplingConfig

TurnRewards = list[list[float]]
"""Per episode, per turn rewards (same shape as the episodes' turns)."""


@runtime_checkable
class TurnRewardFn(Protocol):
    """Maps episodes to one reward per turn."""

    name: str

    def __call__(self, episodes: Sequence[EpisodeRecord]) -> TurnRewards:
        """Return ``rewards[i][t]`` for turn ``t`` of episode ``i``."""
        ...


@dataclass
class EnvReward:
    """The environment's per-turn reward, exactly as ``step`` paid it.

    Not the episode's [0, 1] score: that is a summary for people (WebShop pays it on the buying
    turn anyway), while an environment with per-turn rewards (Sokoban's step cost, +1 per box
    onto a target, +10 when solved) gives turn-level credit the signal it was built for.
    """

    name: str = "env"

    def __call__(self, episodes: Sequence[EpisodeRecord]) -> TurnRewards:
        """Return each turn's environment reward."""
        return [[float(t.reward) for t in episode.turns] for episode in episodes]


@dataclass
class SuccessReward:
    """1 on the last turn of an episode that succeeded, 0 on every other turn.

    The environment's reward can pay a near miss (WebShop pays its [0, 1] purchase score: the
    right product with one option wrong earns about 0.8), so group-relative advantages raise
    near misses, while the success rate counts them as failures. This return counts as the
    success rate does.
    """

    name: str = "success"

    def __call__(self, episodes: Sequence[EpisodeRecord]) -> TurnRewards:
        """Return 1.0 on a successful episode's last turn, 0.0 elsewhere."""
        rewards: TurnRewards = []
        for episode in episodes:
            row = [0.0] * len(episode.turns)
            if row and episode.success:
                row[-1] = 1.0
            rewards.append(row)
        return rewards


EPISODE_REWARDS: dict[str, type[EnvReward] | type[SuccessReward]] = {
    "env": EnvReward,
    "success": SuccessReward,
}
"""What an episode earns before the shaping terms (``CycleConfig.reward``), by name."""


@dataclass
class InvalidActionPenalty:
    """``-penalty`` on each turn whose action was invalid (unparsable or not admissible)."""

    penalty: float = 0.1
    name: str = "invalid_action"

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.penalty < 0:
            raise ConfigError(f"invalid-action penalty ({self.penalty}) must be >= 0")

    def __call__(self, episodes: Sequence[EpisodeRecord]) -> TurnRewards:
        """Return ``-penalty`` on invalid turns, 0 elsewhere."""
        return [[-self.penalty if not t.action_valid else 0.0 for t in e.turns] for e in episodes]


@dataclass
class TurnCost:
    """``-cost`` on every turn: among equally good episodes the shorter one earns more."""

    cost: float = 0.01
    name: str = "turn_cost"

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.cost < 0:
            raise ConfigError(f"per-turn cost ({self.cost}) must be >= 0")

    def __call__(self, episodes: Sequence[EpisodeRecord]) -> TurnRewards:
        """Return ``-cost`` on every turn."""
        return [[-self.cost] * len(e.turns) for e in episodes]


def compute_turn_rewards(
    episodes: Sequence[EpisodeRecord],
    functions: Sequence[TurnRewardFn],
    weights: Sequence[float] | None = None,
) -> TurnRewards:
    """Weighted sum of every function's per-turn rewards: r_t = sum_j w_j * r_t^(j)."""
    if not functions:
        raise ConfigError("at least one reward function is needed")
    weights = list(weights) if weights is not None else [1.0] * len(functions)
    if len(weights) != len(functions):
        raise ConfigError(
            f"reward weights ({len(weights)}) must match reward functions ({len(functions)})"
        )
    total: TurnRewards = [[0.0] * len(e.turns) for e in episodes]
    for fn, weight in zip(functions, weights, strict=True):
        values = fn(episodes)
        _check_shape(fn.name, episodes, values)
        for row, add in zip(total, values, strict=True):
            for t, value in enumerate(add):
                row[t] += weight * float(value)
    return total


def default_reward_functions(
    invalid_action_penalty: float = 0.1, turn_cost: float = 0.01, reward: str = "env"
) -> list[TurnRewardFn]:
    """Return the episode reward ``reward`` names plus the two shaping terms (either may be 0)."""
    if reward not in EPISODE_REWARDS:
        raise ConfigError(f"reward ({reward!r}) must be one of {', '.join(EPISODE_REWARDS)}")
    return [
        EPISODE_REWARDS[reward](),
        InvalidActionPenalty(invalid_action_penalty),
        TurnCost(turn_cost),
    ]


def _check_shape(name: str, episodes: Sequence[EpisodeRecord], values: TurnRewards) -> None:
    if len(values) != len(episodes) or any(
        len(v) != len(e.turns) for v, e in zip(values, episodes, strict=False)
    ):
        raise ConfigError(
            f"reward function {name!r} must return one reward per turn of every episode"
        )


JUDGE_SYSTEM = (
    "You grade single steps of an agent working on a task. Answer with one word: YES if the "
    "action is a sensible step toward completing the task, NO otherwise."
)


@dataclass
class LLMJudgeReward:
    """A judge model votes on every turn; the majority of ``votes`` samples decides.

    The judge sees the task, the observation and the action, and answers YES or NO. A turn earns
    ``+scale`` when more than half of the parsable votes say YES, ``-scale`` when more than half say
    NO, and 0 on a tie or when no vote could be parsed (recorded on the judge, not raised).
    """

    policy: ChatPolicy
    """A ``ChatPolicy`` (``generate(conversations, sampling) -> list[Generation]``)."""
    sampling: SamplingConfig
    """The ``SamplingConfig`` passed to ``generate`` (sampling with temperature > 0 for votes)."""
    votes: int = 3
    scale: float = 0.1
    name: str = "llm_judge"
    unparsable_votes: int = 0
    """Votes that were neither YES nor NO so far (a health figure for the judge)."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.votes < 1:
            raise ConfigError(f"judge votes ({self.votes}) must be >= 1")
        check_number("scale", self.scale, low=0.0)

    def __call__(self, episodes: Sequence[EpisodeRecord]) -> TurnRewards:
        """Ask the judge ``votes`` times per turn (one batched call) and score the majority."""
        conversations: list[list[dict[str, str]]] = []
        for episode in episodes:
            for turn in episode.turns:
                conversation = judge_conversation(episode.instruction, turn)
                conversations.extend([conversation] * self.votes)
        generations = self.policy.generate(conversations, self.sampling) if conversations else []
        verdicts = [parse_vote(g.text) for g in generations]
        self.unparsable_votes += sum(v is None for v in verdicts)
        out: TurnRewards = []
        index = 0
        for episode in episodes:
            row = []
            for _ in episode.turns:
                row.append(self.scale * majority_vote(verdicts[index : index + self.votes]))
                index += self.votes
            out.append(row)
        return out


def judge_conversation(instruction: str, turn: TurnRecord) -> list[dict[str, str]]:
    """Build the chat a judge answers for one turn."""
    user = (
        f"Task: {instruction}\nObservation: {turn.observation[:1500]}\n"
        f"Action taken: {turn.action}\nIs this action a sensible step? Answer YES or NO."
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


_VOTE = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def parse_vote(text: str) -> bool | None:
    """Return the first YES/NO word of a judge's answer (None when there is none)."""
    match = _VOTE.search(text)
    return None if match is None else match.group(1).lower() == "yes"


def majority_vote(votes: Sequence[bool | None]) -> int:
    """+1 if YES votes outnumber NO votes, -1 if the reverse, 0 on a tie (unparsable ignored)."""
    yes = sum(v is True for v in votes)
    no = sum(v is False for v in votes)
    return (yes > no) - (no > yes)
