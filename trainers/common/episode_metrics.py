"""Evaluation figures of a set of episodes: success, score, turns, validity, tokens, Pass@(K,T).

Pass@(K,T) is the share of goals solved by at least one of K sampled episodes within T turns.
With n >= K episodes per goal of which c solved the goal in at most T turns, we use the unbiased
estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on Code", Eq. 1):
  pass@K = 1 - C(n - c, K) / C(n, K), averaged over goals.
Reading the table by rows (more samples K) against columns (more turns T) tells breadth from
depth: an agent that needs more tries gains along K; one that needs longer episodes along T.

Two policies evaluated on the same goals are compared goal by goal (:func:`compare_paired`),
which resolves smaller differences than two independent intervals: success by the exact
McNemar test on the goals only one of them solved, score by the 95% interval of the mean
per-goal difference.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb, sqrt

from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord
from skillrl_core.significance import mcnemar_exact


@dataclass
class EpisodeSummary:
    """Mean figures of a set of episodes."""

    episodes: int
    success_rate: float
    mean_score: float
    mean_turns: float
    invalid_action_rate: float
    """Invalid actions / turns."""
    tokens_per_episode: float
    """Prompt + generated tokens per episode."""
    completion_tokens_per_episode: float

    @property
    def successes(self) -> int:
        """Episodes that succeeded."""
        return round(self.success_rate * self.episodes)

    @property
    def success_interval(self) -> tuple[float, float]:
        """95% Wilson interval of the success rate ((0, 1) without episodes)."""
        if self.episodes == 0:
            return 0.0, 1.0
        return wilson_interval(self.successes, self.episodes)


def summarise(episodes: Sequence[EpisodeRecord]) -> EpisodeSummary:
    """Mean success, score, turns, invalid-action rate and tokens of ``episodes``."""
    n = len(episodes)
    if n == 0:
        return EpisodeSummary(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    turns = sum(e.num_turns for e in episodes)
    prompt = sum(t.prompt_tokens for e in episodes for t in e.turns)
    completion = sum(t.completion_tokens for e in episodes for t in e.turns)
    return EpisodeSummary(
        episodes=n,
        success_rate=sum(e.success for e in episodes) / n,
        mean_score=sum(e.score for e in episodes) / n,
        mean_turns=turns / n,
        invalid_action_rate=sum(e.invalid_actions for e in episodes) / max(turns, 1),
        tokens_per_episode=(prompt + completion) / n,
        completion_tokens_per_episode=completion / n,
    )


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n - c, k) / C(n, k): chance that k of n samples (c correct) hold a correct one."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ConfigError(f"pass@k needs 0 <= c ({c}) <= n ({n}) and 1 <= k ({k}) <= n")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def solved_within(episode: EpisodeRecord, turns: int) -> bool:
    """Whether the episode succeeded in at most ``turns`` turns."""
    return episode.success and episode.num_turns <= turns


def pass_at_k_t(
    episodes: Sequence[EpisodeRecord], ks: Sequence[int], ts: Sequence[int]
) -> dict[tuple[int, int], float]:
    """Pass@(K,T) over goals (episodes grouped by ``goal_id``), for every K in ks and T in ts."""
    by_goal: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for episode in episodes:
        by_goal[episode.goal_id].append(episode)
    if not by_goal:
        raise ConfigError("Pass@(K,T) needs at least one episode")
    fewest = min(len(v) for v in by_goal.values())
    if max(ks) > fewest:
        raise ConfigError(
            f"K ({max(ks)}) exceeds the episodes sampled per goal ({fewest}); sample more"
        )
    table: dict[tuple[int, int], float] = {}
    for k in ks:
        for t in ts:
            values = [
                pass_at_k(len(group), sum(solved_within(e, t) for e in group), k)
                for group in by_goal.values()
            ]
            table[(k, t)] = sum(values) / len(values)
    return table


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a success rate (Wilson 1927; z = 1.96 gives 95%).

    centre = (p + z^2 / 2n) / (1 + z^2 / n),
    half-width = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2), with p = successes / n.
    Unlike the normal approximation it stays inside [0, 1] and is not empty at 0 or n successes.
    """
    if n < 1 or not 0 <= successes <= n:
        raise ConfigError(
            f"a Wilson interval needs n ({n}) >= 1 and 0 <= successes ({successes}) <= n"
        )
    p = successes / n
    scale = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / scale
    half = z / scale * sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class PairedComparison:
    """Two evaluations of the same goals, goal by goal (``after`` minus ``before``)."""

    goals: int
    successes_before: int
    successes_after: int
    lost: int
    """Goals solved before and not after."""
    won: int
    """Goals solved after and not before."""
    mcnemar_p: float
    """Exact two-sided McNemar p-value of the success change (1.0 when no goal changed)."""
    score_difference: float
    """Mean per-goal score difference."""
    score_half_width: float
    """Half-width of its 95% interval (normal approximation; 0 for one goal)."""


def compare_paired(
    before: Sequence[EpisodeRecord], after: Sequence[EpisodeRecord], z: float = 1.96
) -> PairedComparison:
    """Compare two evaluations of the same goals (one episode per goal each), goal by goal.

    Episodes are matched by (split, goal id); a goal present in only one of them is an error.
    """
    first = _one_per_goal(before, "before")
    second = _one_per_goal(after, "after")
    if set(first) != set(second):
        only = sorted(set(first) ^ set(second))[:3]
        raise ConfigError(f"a paired comparison needs the same goals on both sides; differ: {only}")
    keys = sorted(first)
    lost = sum(first[k].success and not second[k].success for k in keys)
    won = sum(second[k].success and not first[k].success for k in keys)
    diffs = [second[k].score - first[k].score for k in keys]
    mean = sum(diffs) / len(diffs)
    half = 0.0
    if len(diffs) > 1:
        variance = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)
        half = z * sqrt(variance / len(diffs))
    return PairedComparison(
        goals=len(keys),
        successes_before=sum(bool(first[k].success) for k in keys),
        successes_after=sum(bool(second[k].success) for k in keys),
        lost=lost,
        won=won,
        mcnemar_p=mcnemar_exact(lost, won),
        score_difference=mean,
        score_half_width=half,
    )


def _one_per_goal(
    episodes: Sequence[EpisodeRecord], side: str
) -> dict[tuple[str, str], EpisodeRecord]:
    by_goal: dict[tuple[str, str], EpisodeRecord] = {}
    for episode in episodes:
        key = (episode.split, episode.goal_id)
        if key in by_goal:
            raise ConfigError(f"{side}: goal {episode.goal_id!r} has more than one episode")
        by_goal[key] = episode
    if not by_goal:
        raise ConfigError(f"{side}: no episodes to compare")
    return by_goal
