"""``skillrl eval`` as a library call: greedy figures, Pass@(K,T) and timings of one policy.

For each goal of the split, one greedy episode gives success, score, turns, invalid-action rate
and tokens per episode; ``samples`` episodes sampled at ``temperature`` give the Pass@(K,T) table
(with ``samples=1`` the table is read off the greedy episodes, so only K=1). Timings come from the
runner (model / environment / retrieval, per batched turn and per episode turn).

A result names its skills arm (``on``: the entries retrieved for the episode's own goal;
``placebo``: as many entries retrieved for another goal; ``off``: none, as
:mod:`skillrl.skill_arms` defines them) and keeps each goal's greedy outcome, so that arms
played on the same goals compare goal by goal (:func:`compare_arms`: won, lost, exact McNemar).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from skillrl.rollout import RolloutStats
from skillrl_core.errors import ConfigError
from skillrl_core.goal_range import GoalRange
from skillrl_core.option_fields import SEED_MAX, option
from skillrl_core.records import EpisodeRecord
from skillrl_core.significance import mcnemar_exact
from skillrl_core.splits import TEST_SPLIT
from skillrl_core.validation import check_finite_fields
from trainers.common.episode_metrics import EpisodeSummary, pass_at_k_t, summarise
from trainers.common.policy_rollouts import PolicyRollouts

EVAL_DTYPE = "float32"
"""The number format ``skillrl eval`` plays in unless told otherwise. In bf16, left-padding a
prompt into a batch moved its last-token logits by up to 0.5 (4e-5 in fp32), so greedy play
parted ways with one-at-a-time play in 10 of 16 episodes and a figure could move with the batch
size alone; in fp32 the same goals take the same actions at batch sizes 1, 7 and 32
(tests/trainers/test_eval_batch_invariance.py). Training runs evaluate in fp32 too."""


@dataclass
class EvalConfig:
    """Which goals to evaluate and how."""

    split: str = option(TEST_SPLIT, help="Split of the goals.")
    goals: GoalRange = GoalRange.first_n(20)
    """The goals of the split, by index (``skillrl eval --goals 250-349``)."""
    samples: int = option(
        1,
        help="Sampled episodes per goal for Pass@(K,T) (1: the greedy episode).",
        low=1,
    )
    temperature: float = option(0.7, help="Sampling temperature of those episodes.", low=0)
    ks: tuple[int, ...] = (1,)
    """K values of the Pass@(K,T) table (each <= samples)."""
    ts: tuple[int, ...] = (5, 10, 15)
    """T values (turn budgets) of the table."""
    seed: int = option(0, help="Env and sampling seed.", low=0, high=SEED_MAX)

    def __post_init__(self) -> None:
        check_finite_fields(self)  # and the bounds each option declares
        if not isinstance(self.goals, GoalRange):
            raise ConfigError(f"goals ({self.goals!r}) must be a GoalRange (e.g. goals 0-19)")
        if not self.ks or not self.ts or min(self.ks) < 1 or min(self.ts) < 1:
            raise ConfigError(f"K values {self.ks} and T values {self.ts} must be >= 1")
        if max(self.ks) > self.samples:
            raise ConfigError(
                f"K ({max(self.ks)}) must not exceed samples per goal ({self.samples})"
            )
        if self.samples > 1 and self.temperature <= 0:
            raise ConfigError(f"sampling {self.samples} episodes needs temperature > 0")


@dataclass(frozen=True)
class GoalOutcome:
    """One goal's greedy episode, as a paired comparison reads it."""

    goal_index: int
    goal_id: str
    success: bool
    score: float
    turns: int


@dataclass
class EvalResult:
    """Figures of one policy on one setting (its skills arm)."""

    skills: bool
    """Whether the prompts held entries (arms ``on`` and ``placebo``)."""
    greedy: EpisodeSummary
    pass_at: dict[str, float]
    """``"K,T"`` -> Pass@(K,T)."""
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    """``per_turn`` and ``per_batch`` seconds by cause (model, env, retrieval)."""
    seconds: float = 0.0
    arm: str = ""
    """``on``, ``placebo`` or ``off`` (:data:`skillrl.skill_arms.SKILL_ARMS`)."""
    outcomes: list[GoalOutcome] = field(default_factory=list)
    """Each goal's greedy episode, in goal order."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the greedy success's 95% interval included)."""
        data = asdict(self)
        data["greedy"]["success_interval"] = list(self.greedy.success_interval)
        return data


def evaluate(runner: PolicyRollouts, config: EvalConfig, arm: str | None = None) -> EvalResult:
    """Play the goals greedily (and sampled, for Pass@K) and measure everything.

    ``arm``: the name of the runner's skills setting (default: ``on`` with a bank, else ``off``).
    """
    runner.timings = RolloutStats()
    started = time.perf_counter()
    # Goal i's seed is seed + i wherever it falls in the range: a goal plays alike in any range.
    starts = [runner.start(config.split, i, seed=config.seed + i) for i in config.goals.indices()]
    greedy = runner.run(starts, temperature=0.0)
    if config.samples > 1:
        sampled_starts = [s for s in starts for _ in range(config.samples)]
        sampled = runner.run(
            sampled_starts, temperature=config.temperature, sampling_seed=config.seed
        )
        table = pass_at_k_t(sampled, config.ks, config.ts)
    else:
        table = pass_at_k_t(greedy, (1,), config.ts)
    return EvalResult(
        skills=runner.bank is not None,
        greedy=summarise(greedy),
        pass_at={f"{k},{t}": v for (k, t), v in table.items()},
        timings={"per_turn": runner.timings.per_turn(), "per_batch": runner.timings.per_batch()},
        seconds=time.perf_counter() - started,
        arm=arm or ("on" if runner.bank is not None else "off"),
        outcomes=[
            _outcome(index, episode)
            for index, episode in zip(config.goals.indices(), greedy, strict=True)
        ],
    )


def _outcome(goal_index: int, episode: EpisodeRecord) -> GoalOutcome:
    return GoalOutcome(
        goal_index, episode.goal_id, bool(episode.success), float(episode.score), episode.num_turns
    )


@dataclass(frozen=True)
class ArmComparison:
    """Two arms on the same goals: how many goals each won alone, and the exact McNemar p."""

    baseline: str
    other: str
    baseline_successes: int
    other_successes: int
    won: int
    """Goals ``other`` solved and ``baseline`` did not."""
    lost: int
    """Goals ``baseline`` solved and ``other`` did not."""
    p_value: float
    """Exact two-sided McNemar p on the discordant goals."""
    score_difference: float
    """Mean over goals of (other's score - baseline's score)."""

    @property
    def resolved(self) -> bool:
        """Whether the difference is more than chance at the 5% level."""
        return self.p_value < 0.05


def compare_arms(results: list[EvalResult]) -> list[ArmComparison]:
    """Compare the first result's arm with each later one, goal by goal.

    Every result must hold the same goals (one evaluation played them all).
    """
    comparisons = []
    if not results:
        return comparisons
    first = results[0]
    for other in results[1:]:
        goals = [o.goal_index for o in other.outcomes]
        if goals != [o.goal_index for o in first.outcomes]:
            raise ConfigError(
                f"arms {first.arm!r} and {other.arm!r} were played on different goals"
            )
        pairs = list(zip(first.outcomes, other.outcomes, strict=True))
        won = sum(b.success and not a.success for a, b in pairs)
        lost = sum(a.success and not b.success for a, b in pairs)
        comparisons.append(
            ArmComparison(
                baseline=first.arm,
                other=other.arm,
                baseline_successes=sum(a.success for a, _ in pairs),
                other_successes=sum(b.success for _, b in pairs),
                won=won,
                lost=lost,
                p_value=mcnemar_exact(lost, won),
                score_difference=sum(b.score - a.score for a, b in pairs) / max(len(pairs), 1),
            )
        )
    return comparisons
