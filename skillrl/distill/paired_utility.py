"""Paired utility of entries: each goal played with an entry and again with it withheld.

D2Skill (Tu et al. 2026, "Dynamic Dual-Granularity Skill Bank for Agentic RL") plays paired
baseline and skill-injected rollouts under the same policy and takes their performance gap as
the skills' utility. We depart in what the baseline withholds: not every skill, but one entry
(a leave-one-out), so the gap of a pair belongs to that entry alone and not to the whole prompt
it shared with others. For entry E and goal g with seed s::

    d(E, g) = success(g, s | bank) - success(g, s | bank without E)       # in {-1, 0, +1}
    utility(E) = mean over pairs of d(E, g) = (with_only - without_only) / pairs

(and the same mean for the score), with the exact McNemar test on the discordant pairs saying
whether it is more than chance (:class:`memory.types.PairedEvidence`).

Cost, kept low as in D2Skill: one rollout per goal with the bank as it is serves every entry it
retrieved, and an entry gets a rollout without it only on the goals whose rollout with it put it
in a prompt: a goal that never showed an entry to the agent says nothing about it. Measuring
``n`` goals costs ``n`` rollouts plus one per (goal, retrieved entry); all of them run batched
through one :class:`~skillrl.rollout.RolloutEngine`.

A pair is exact for a deterministic agent (the scripted ones; a model decoding greedily): the
two rollouts share the goal and the environment's seed. A sampling agent's two rollouts share
those but not their random draws (its generator is seeded per batch, and the batches differ).

The rollouts are neither stored as trajectories nor counted in the entries' usage statistics: a
rollout with an entry withheld is an ablation, not the policy's behaviour, and would bias the
observational utility of :mod:`memory.stats`. Only the pairs are kept (when ``record`` is on),
added to each entry's paired figures (:func:`memory.paired.add_paired_evidence`), which
``skillrl skills show`` prints and bank upkeep's paired rule reads.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memory.paired import add_paired_evidence
from memory.types import PairedEvidence
from skillrl.agents.base import Agent
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine
from skillrl_core.episode_limits import MAX_TURNS
from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord
from skillrl_core.splits import TEST_SPLIT
from skillrl_core.validation import check_finite_fields

if TYPE_CHECKING:
    from memory.bank import SkillBank
    from memory.config import RetrievalConfig

logger = logging.getLogger(__name__)


@dataclass
class PairedUtilityConfig:
    """What a paired-utility measurement measures, how it plays, and whether it keeps the pairs."""

    entry_ids: frozenset[str] = frozenset()
    """Entries to measure; empty: every entry some goal's rollout with the bank retrieved."""
    max_turns: int = MAX_TURNS
    """Turn limit per episode (both rollouts of a pair)."""
    max_parallel: int = 16
    """Episodes played at once (one batched generation covers them)."""
    retrieval: RetrievalConfig | None = None
    """``memory.RetrievalConfig`` of every turn's retrieval (None: the bank's defaults)."""
    record: bool = True
    """Add the pairs to the entries' stored paired figures (off: measure and report only)."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        self.entry_ids = frozenset(self.entry_ids)
        if self.max_turns < 1:
            raise ConfigError(f"max_turns ({self.max_turns}) must be at least 1")
        if self.max_parallel < 1:
            raise ConfigError(f"max_parallel ({self.max_parallel}) must be at least 1")


@dataclass
class EntryPair:
    """One goal played with an entry and with it withheld (same goal, same seed)."""

    entry_id: str
    goal_id: str
    seed: int
    success_with: bool
    success_without: bool
    score_with: float
    score_without: float

    @property
    def success_difference(self) -> int:
        """+1: only the rollout with the entry succeeded; -1: only the one without it; else 0."""
        return int(self.success_with) - int(self.success_without)


@dataclass
class PairedUtilityReport:
    """What a measurement played and found."""

    goals: int
    """Goals played with the bank as it is (one rollout each)."""
    pairs: list[EntryPair] = field(default_factory=list)
    """Every pair, grouped by entry (in the order entries were first retrieved), then by goal."""
    evidence: dict[str, PairedEvidence] = field(default_factory=dict)
    """This measurement's figures per measured entry."""
    stored: dict[str, PairedEvidence] = field(default_factory=dict)
    """The entries' figures in the bank afterwards, earlier measurements included (empty when
    nothing was recorded)."""
    not_retrieved: list[str] = field(default_factory=list)
    """Entries asked for that no goal's rollout retrieved (no pair measures them)."""
    rollouts: int = 0
    """Episodes played: one per goal with the bank, one per (goal, retrieved entry) without it."""
    failed_episodes: int = 0
    """Rollouts that ended in an error not of the agent's making; their pairs are left out."""


def retrieved_entries(record: EpisodeRecord) -> list[str]:
    """Ids of the entries any turn of ``record`` put in its prompt, in first-seen order."""
    seen: dict[str, None] = {}
    for turn in record.turns:
        for entry_id in turn.retrieved_ids:
            seen.setdefault(entry_id)
    return list(seen)


def plan_pairs(
    records_with: Sequence[EpisodeRecord], wanted: frozenset[str]
) -> list[tuple[int, str]]:
    """``(goal position, entry id)`` of every rollout without an entry the measurement needs.

    One per entry that goal's rollout with the bank retrieved (only the ``wanted`` ones, when
    given); a rollout that failed with an error pairs with nothing.
    """
    plan = []
    for position, record in enumerate(records_with):
        if record.error:
            continue
        plan += [
            (position, entry_id)
            for entry_id in retrieved_entries(record)
            if not wanted or entry_id in wanted
        ]
    return plan


def evidence_of(pairs: Sequence[EntryPair]) -> dict[str, PairedEvidence]:
    """Sum the pairs of each entry into its :class:`PairedEvidence` (module docstring)."""
    evidence: dict[str, PairedEvidence] = {}
    for pair in pairs:
        one = PairedEvidence(
            pairs=1,
            with_only=int(pair.success_difference == 1),
            without_only=int(pair.success_difference == -1),
            score_delta_sum=pair.score_with - pair.score_without,
        )
        evidence[pair.entry_id] = evidence.get(pair.entry_id, PairedEvidence()) + one
    return evidence


def measure_paired_utility(
    agent: Agent,
    bank: SkillBank | None,
    starts: Sequence[EpisodeStart],
    config: PairedUtilityConfig | None = None,
) -> PairedUtilityReport:
    """Play ``starts`` with the bank, then each again per retrieved entry with it withheld.

    Any agent that uses skills will do (a model's :class:`~skillrl.agents.llm.LLMAgent`, a
    scripted one in tests). Every start needs a seed: a pair is the same goal and seed twice.
    """
    config = config or PairedUtilityConfig()
    if bank is None:
        raise ConfigError("a paired-utility measurement needs a bank to retrieve from")
    if not getattr(agent, "uses_skills", False):
        raise ConfigError(
            f"agent {getattr(agent, 'name', type(agent).__name__)!r} retrieves no skills, so no "
            "entry can make a difference to it: measure with an agent that uses skills"
        )
    unseeded = [i for i, start in enumerate(starts) if start.seed is None]
    if unseeded:
        raise ConfigError(
            f"start {unseeded[0]} has no seed: the two rollouts of a pair must share one"
        )
    held_out = [i for i, start in enumerate(starts) if start.split == TEST_SPLIT]
    if config.record and held_out:
        raise ConfigError(
            f"start {held_out[0]} plays a {TEST_SPLIT!r} goal: held-out goals must never decide "
            "what the bank keeps, so their pairs are not recorded (measure with record off)"
        )
    if config.record:
        bank.require_writable()  # before anything is played, not after
    engine = RolloutEngine(
        agent,
        bank=bank,
        config=RolloutConfig(
            max_turns=config.max_turns,
            max_parallel=config.max_parallel,
            record=False,
            retrieval=config.retrieval,
            count_retrievals=False,  # module docstring: measuring changes no usage statistics
        ),
    )
    records_with = engine.run(list(starts))
    plan = plan_pairs(records_with, config.entry_ids)
    records_without = engine.run(
        [
            dataclasses.replace(
                starts[position], withheld_ids=starts[position].withheld_ids | {entry_id}
            )
            for position, entry_id in plan
        ]
    )
    report = PairedUtilityReport(goals=len(starts), rollouts=len(starts) + len(plan))
    report.failed_episodes = sum(bool(r.error) for r in [*records_with, *records_without])
    for (position, entry_id), without in zip(plan, records_without, strict=True):
        if without.error:
            continue
        with_ = records_with[position]
        report.pairs.append(
            EntryPair(
                entry_id=entry_id,
                goal_id=with_.goal_id,
                seed=int(starts[position].seed),  # type: ignore[arg-type]  # checked above
                success_with=bool(with_.success),
                success_without=bool(without.success),
                score_with=float(with_.score),
                score_without=float(without.score),
            )
        )
    order = {entry_id: i for i, entry_id in enumerate(dict.fromkeys(e for _, e in plan))}
    report.pairs.sort(key=lambda p: order[p.entry_id])  # stable: goals stay in order
    report.evidence = evidence_of(report.pairs)
    report.not_retrieved = sorted(config.entry_ids - {entry_id for _, entry_id in plan})
    if config.record and report.evidence:
        add_paired_evidence(bank, report.evidence)
        stored = bank.entries(sorted(report.evidence))
        report.stored = {entry_id: stored[entry_id].paired for entry_id in report.evidence}
    logger.info(
        "paired utility: %d goals, %d pairs over %d entries",
        report.goals,
        len(report.pairs),
        len(report.evidence),
    )
    return report
