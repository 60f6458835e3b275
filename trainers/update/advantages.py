"""Advantages for turn-level GRPO: episode-level (GRPO), step-level (GiGPO) and their sum.

Notation (GiGPO, Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training"):
a group holds G episodes from the same start; r_t is the reward of turn t.

- Episode level (GiGPO Eq. 3, GRPO's group-relative advantage):
  A^E(tau_i) = (R(tau_i) - mean_j R(tau_j)) / F_norm, with R(tau) = sum_t r_t.
- Step level (GiGPO Eqs. 5-7): turns of the group's episodes whose observation is identical
  (an "anchor state") form a step group; each turn's discounted return
  G_t = sum_k gamma^k r_{t+k} is normalised within its step group:
  A^S(a_t) = (G_t - mean G) / F_norm.
- Combined (GiGPO Eq. 8): A(a_t) = A^E(tau) + w * A^S(a_t); w = 0 is plain GRPO.

Rejection-sampling fine-tuning (RFT, "expert iteration" on the learner's own samples): every
turn of an episode that succeeded gets advantage 1 and every other turn 0, so the clipped loss at
ratio 1 is the negative log-likelihood of the tokens the learner produced in its successful
episodes, and nothing is learned from failures. ``rft_weight`` mixes that term into GRPO:
A(a_t) = A^E(tau) + rft_weight * 1[tau succeeded] + w * A^S(a_t). In the record the RFT term is
part of the episode part, since it is one value per episode.

F_norm is the group's standard deviation (``scale="group"``) or 1 (``scale="none"``, Dr. GRPO).
Departures: we use the population standard deviation (ddof=0) where GiGPO and TRL use torch's
unbiased one, so a two-episode group [1, 0] gets advantages +1/-1; groups (and step groups) whose
values are all equal, and step groups of one turn, get advantage 0 rather than 0/eps noise.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord

_EQUAL_TOL = 1e-9

ESTIMATORS: tuple[str, ...] = ("grpo", "rft")
"""``grpo``: group-relative episode and step advantages; ``rft``: 1 on successful episodes."""


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """G_t = r_t + gamma * G_{t+1} (GiGPO Eq. 6), computed right to left."""
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


def group_normalise(
    values: Sequence[float], keys: Sequence[Hashable], scale: str = "group"
) -> list[float]:
    """(x_i - mean_{g(i)}) / std_{g(i)} within each key's group (GRPO / GiGPO Eqs. 3 and 7).

    A group of one value, or of equal values, yields 0 for all its members.
    """
    if len(values) != len(keys):
        raise ConfigError(f"values ({len(values)}) and group keys ({len(keys)}) differ in length")
    if scale not in ("group", "none"):
        raise ConfigError(f"scale ({scale!r}) must be 'group' or 'none'")
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        members[key].append(i)
    out = [0.0] * len(values)
    for indices in members.values():
        group = [float(values[i]) for i in indices]
        if len(group) < 2 or max(group) - min(group) <= _EQUAL_TOL:
            continue
        mean = sum(group) / len(group)
        std = math.sqrt(sum((x - mean) ** 2 for x in group) / len(group))
        denominator = std if scale == "group" else 1.0
        for i in indices:
            out[i] = (float(values[i]) - mean) / denominator
    return out


def episode_advantages(
    returns: Sequence[float], group_ids: Sequence[Hashable], scale: str = "group"
) -> list[float]:
    """A^E(tau_i): each episode's return normalised within its group (GiGPO Eq. 3)."""
    return group_normalise(returns, group_ids, scale)


def step_advantages(
    turn_returns: Sequence[Sequence[float]],
    observations: Sequence[Sequence[str]],
    group_ids: Sequence[Hashable],
    scale: str = "group",
) -> list[list[float]]:
    """A^S(a_t): each turn's discounted return normalised in its step group (GiGPO Eq. 7).

    A step group is the set of turns, across the episodes of one group, with the same
    observation (GiGPO's anchor state, Eq. 5).
    """
    flat_values: list[float] = []
    flat_keys: list[tuple[Hashable, str]] = []
    for returns, seen, group in zip(turn_returns, observations, group_ids, strict=True):
        if len(returns) != len(seen):
            raise ConfigError("every turn needs both a return and an observation")
        flat_values.extend(returns)
        flat_keys.extend((group, obs) for obs in seen)
    flat = group_normalise(flat_values, flat_keys, scale)
    out: list[list[float]] = []
    start = 0
    for returns in turn_returns:
        out.append(flat[start : start + len(returns)])
        start += len(returns)
    return out


def combine_advantages(
    episode: Sequence[float], step: Sequence[Sequence[float]], weight: float
) -> list[list[float]]:
    """A(a_t) = A^E(tau) + w * A^S(a_t) (GiGPO Eq. 8)."""
    return [[e + weight * s for s in row] for e, row in zip(episode, step, strict=True)]


@dataclass
class TurnAdvantages:
    """Advantages of every turn of a batch of episodes, with their parts."""

    advantages: list[list[float]]
    """A(a_t), per episode, per turn: what the loss uses."""
    episode: list[float]
    """A^E per episode."""
    step: list[list[float]]
    """A^S per episode, per turn."""
    returns: list[float]
    """R(tau) per episode (undiscounted sum of turn rewards)."""
    step_group_sizes: dict[int, int] = field(default_factory=dict)
    """How many step groups had each size (size -> count)."""
    step_weight: float = 0.0
    """w in A = A^E + w * A^S: the weight the step part got."""


class AdvantageEstimator(Protocol):
    """How the turns of a batch of grouped episodes get their advantages: one class each.

    ``skillrl train --estimator`` picks :class:`GroupRelative` (``grpo``, with RFT mixed in by
    ``rft_weight``) or :class:`RejectionSampling` (``rft``) through
    :meth:`trainers.update.config.GRPOConfig.advantage_estimator`; a library caller passes any
    object of this shape to :class:`trainers.cycle.cycle.TrainingRun` (``advantage_estimator=``).
    :func:`with_episode_part` builds the record from one value per episode.
    """

    name: str
    """Short name, as the run's screen and records give it."""

    def estimate(
        self, episodes: Sequence[EpisodeRecord], rewards: Sequence[Sequence[float]]
    ) -> TurnAdvantages:
        """Return every turn's advantage (``rewards``: each episode's turn rewards)."""
        ...


def with_episode_part(
    episodes: Sequence[EpisodeRecord],
    rewards: Sequence[Sequence[float]],
    episode: Sequence[float],
    *,
    step_weight: float = 0.0,
    gamma: float = 0.95,
    scale: str = "group",
) -> TurnAdvantages:
    """Return the record of advantages ``A^E + step_weight * A^S`` from one value per episode.

    ``episode`` is each episode's part (every turn of it gets that value); the step part is
    GiGPO's (Eq. 7: discounted returns normalised among the turns of a group that saw the same
    observation), recorded even with ``step_weight`` 0.
    """
    if len(episodes) != len(rewards) or len(episodes) != len(episode):
        raise ConfigError(
            f"episodes ({len(episodes)}), rewards ({len(rewards)}) and episode parts "
            f"({len(episode)}) differ in length"
        )
    groups = [e.group for e in episodes]
    turn_returns = [discounted_returns(r, gamma) for r in rewards]
    observations = [[t.observation for t in e.turns] for e in episodes]
    step = step_advantages(turn_returns, observations, groups, scale)
    sizes: dict[tuple[Hashable, str], int] = defaultdict(int)
    for group, seen in zip(groups, observations, strict=True):
        for obs in seen:
            sizes[(group, obs)] += 1
    histogram: dict[int, int] = defaultdict(int)
    for size in sizes.values():
        histogram[size] += 1
    return TurnAdvantages(
        advantages=combine_advantages(episode, step, step_weight),
        episode=list(episode),
        step=step,
        returns=[float(sum(r)) for r in rewards],
        step_group_sizes=dict(sorted(histogram.items())),
        step_weight=step_weight,
    )


def _succeeded(episodes: Sequence[EpisodeRecord]) -> list[float]:
    return [1.0 if e.success and not e.error else 0.0 for e in episodes]


@dataclass(frozen=True)
class GroupRelative:
    """``grpo``: A = A^E + rft_weight * 1[succeeded] + step_weight * A^S (GiGPO Eq. 8).

    Episodes without a ``group_id`` form a group on their own (so get zero GRPO advantage).
    """

    step_weight: float = 1.0
    rft_weight: float = 0.0
    gamma: float = 0.95
    scale: str = "group"
    name: str = "grpo"

    def estimate(
        self, episodes: Sequence[EpisodeRecord], rewards: Sequence[Sequence[float]]
    ) -> TurnAdvantages:
        """Return every turn's advantage."""
        if len(episodes) != len(rewards):
            raise ConfigError(f"episodes ({len(episodes)}) and rewards ({len(rewards)}) differ")
        returns = [float(sum(r)) for r in rewards]
        relative = episode_advantages(returns, [e.group for e in episodes], self.scale)
        episode = [
            a + self.rft_weight * s for a, s in zip(relative, _succeeded(episodes), strict=True)
        ]
        return with_episode_part(
            episodes,
            rewards,
            episode,
            step_weight=self.step_weight,
            gamma=self.gamma,
            scale=self.scale,
        )


@dataclass(frozen=True)
class RejectionSampling:
    """``rft``: 1 for every turn of an episode that succeeded, 0 for the rest (no baseline)."""

    gamma: float = 0.95
    """Discount of the step part the record keeps (not trained on)."""
    scale: str = "group"
    name: str = "rft"

    def estimate(
        self, episodes: Sequence[EpisodeRecord], rewards: Sequence[Sequence[float]]
    ) -> TurnAdvantages:
        """Return every turn's advantage."""
        if len(episodes) != len(rewards):
            raise ConfigError(f"episodes ({len(episodes)}) and rewards ({len(rewards)}) differ")
        return with_episode_part(
            episodes, rewards, _succeeded(episodes), gamma=self.gamma, scale=self.scale
        )


def compute_advantages(
    episodes: Sequence[EpisodeRecord],
    rewards: Sequence[Sequence[float]],
    *,
    gamma: float,
    step_weight: float,
    scale: str = "group",
    estimator: str = "grpo",
    rft_weight: float = 0.0,
) -> TurnAdvantages:
    """Episode-level, step-level and combined advantages of grouped episodes, by name.

    ``estimator="rft"`` is :class:`RejectionSampling`; ``"grpo"`` is :class:`GroupRelative`
    with ``step_weight`` and ``rft_weight``.
    """
    if estimator not in ESTIMATORS:
        raise ConfigError(f"estimator ({estimator!r}) must be one of {ESTIMATORS}")
    chosen: AdvantageEstimator
    if estimator == "rft":
        chosen = RejectionSampling(gamma=gamma, scale=scale)
    else:
        chosen = GroupRelative(step_weight, rft_weight, gamma, scale)
    return chosen.estimate(episodes, rewards)
