"""Paired utility on a real bank: a scripted policy that succeeds only with entry A.

Every goal's rollout with the bank retrieves the general entries A and B; withholding A turns
each success into a failure, withholding B changes nothing. So A's paired utility is +1 and
resolved, B's is 0, and an entry no goal retrieves gets no evidence at all; upkeep then retires
B once its zero is resolved, and never A or the unmeasured entry.
"""

from __future__ import annotations

import pytest
from paired_fakes import LEVER, NeedsEntryAgent

from memory import PairedEvidence
from memory.types import EntryDraft
from skillrl.distill import UpkeepConfig, upkeep
from skillrl.distill.paired_utility import (
    PairedUtilityConfig,
    measure_paired_utility,
)
from skillrl.distill.upkeep import paired_verdict
from skillrl.rollout import EpisodeStart
from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord, TurnRecord


def _entries(bank) -> tuple[str, str, str]:
    """A and B: general (every turn retrieves both); C: a task skill of another environment."""
    a = bank.add(
        EntryDraft(kind="general", title="Pull when asked", principle="Pull the lever named.")
    ).entry.id
    b = bank.add(
        EntryDraft(kind="general", title="Keep a tidy desk", principle="Tidy up after work.")
    ).entry.id
    c = bank.add(
        EntryDraft(
            kind="task",
            title="Water the ferns",
            principle="Water ferns weekly.",
            env="garden",
            category="ferns",
        )
    ).entry.id
    return a, b, c


def _starts(first: int, count: int) -> list[EpisodeStart]:
    return [
        EpisodeStart(LEVER, "train", goal_index=g, seed=100 + g)
        for g in range(first, first + count)
    ]


def test_the_needed_entry_gets_a_positive_resolved_utility_and_an_unrelated_one_none(bank):
    a, b, c = _entries(bank)
    agent = NeedsEntryAgent(a)
    report = measure_paired_utility(agent, bank, _starts(0, 8))
    assert report.evidence[a] == PairedEvidence(
        pairs=8, with_only=8, without_only=0, score_delta_sum=8.0
    )
    assert report.evidence[b] == PairedEvidence(
        pairs=8, with_only=0, without_only=0, score_delta_sum=0.0
    )
    assert c not in report.evidence  # never retrieved, so never paired
    assert report.evidence[a].utility == 1.0 and report.evidence[a].p_value == pytest.approx(
        2 / 2**8
    )
    assert report.evidence[b].utility == 0.0 and report.evidence[b].p_value == 1.0
    assert paired_verdict(report.evidence[a], UpkeepConfig()) == "helps"
    # One rollout per goal with the bank, one per (goal, retrieved entry) without it.
    assert report.goals == 8 and report.rollouts == 8 + 2 * 8 and report.failed_episodes == 0
    # The rollouts without A never showed A; every rollout showed B unless B was withheld.
    assert sum(a not in ids for ids in agent.prompts) == 8
    assert sum(b not in ids for ids in agent.prompts) == 8
    pair = next(p for p in report.pairs if p.entry_id == a)
    assert (pair.goal_id, pair.seed, pair.success_with, pair.success_without) == (
        "lever-0",
        100,
        True,
        False,
    )
    # Stored in SQL, and nothing else changed: no trajectories, no usage statistics.
    assert bank.get(a).paired == report.evidence[a] == report.stored[a]
    assert bank.get(c).paired == PairedEvidence()
    assert bank.trajectories.episodes() == []
    assert bank.get(a).times_retrieved == 0 and bank.get(a).episodes_retrieved == 0
    # A second measurement adds its pairs to the first one's.
    again = measure_paired_utility(agent, bank, _starts(8, 2))
    assert again.stored[a] == PairedEvidence(10, 10, 0, 10.0)


def test_only_the_entries_asked_for_are_paired(bank):
    a, b, c = _entries(bank)
    config = PairedUtilityConfig(entry_ids=frozenset({b, c}), record=False)
    report = measure_paired_utility(NeedsEntryAgent(a), bank, _starts(0, 4), config)
    assert set(report.evidence) == {b} and report.rollouts == 4 + 4
    assert report.not_retrieved == [c]
    assert report.stored == {} and bank.get(b).paired == PairedEvidence()  # record=False


def test_a_measurement_refuses_unseeded_starts_and_agents_without_skills(bank):
    a, _, _ = _entries(bank)
    with pytest.raises(ConfigError, match="start 0 has no seed"):
        measure_paired_utility(
            NeedsEntryAgent(a), bank, [EpisodeStart(LEVER, "train", goal_index=0)]
        )
    blind = NeedsEntryAgent(a)
    blind.uses_skills = False
    with pytest.raises(ConfigError, match="retrieves no skills"):
        measure_paired_utility(blind, bank, _starts(0, 1))


def _lever_episode(success: bool, retrieved: list[str]) -> EpisodeRecord:
    turn = TurnRecord(0, "Lever 0 is up.", ["pull", "wait"], "pull", True, float(success),
                      terminated=True, retrieved_ids=list(retrieved))  # fmt: skip
    return EpisodeRecord(LEVER, "lever-0", "Pull lever 0.", "levers", [turn], success=success)


def test_upkeep_retires_only_on_resolved_non_positive_paired_evidence(bank):
    a, b, c = _entries(bank)
    agent = NeedsEntryAgent(a)
    # The episodes that happened to retrieve A failed and the others succeeded: the
    # observational rule alone would retire A (0/8 with it, 8/8 without).
    bank.trajectories.save_episodes(
        [_lever_episode(False, [a]) for _ in range(8)]
        + [_lever_episode(True, []) for _ in range(8)]
    )
    assert list(upkeep(bank, dry_run=True).retired) == [a]
    # 4 pairs resolve nothing: A's 4 wins have McNemar p = 1/8, B's zero has fewer than
    # paired_min_pairs pairs. So B stays, and A is still judged by the observational figures.
    measure_paired_utility(agent, bank, _starts(0, 4))
    report = upkeep(bank, dry_run=True)
    assert list(report.retired) == [a] and "low utility" in report.retired[a]
    for entry_id in (a, b):
        assert paired_verdict(bank.get(entry_id).paired, UpkeepConfig()) == "unresolved"
    # 8 pairs: A's help is significant, which outweighs the observational figures; B's zero is
    # resolved; C was never paired and has no observational evidence either.
    measure_paired_utility(agent, bank, _starts(4, 4))
    report = upkeep(bank)
    assert list(report.retired) == [b]
    assert "does not help in paired rollouts" in report.retired[b]
    assert "0 succeeded only with it, 0 only without it" in report.retired[b]
    assert report.utilities[a].paired.pairs == 8
    assert bank.get(b).status == "retired"
    assert bank.get(a).status == "active" and bank.get(c).status == "active"
    assert bank.history(b)[-1].author == "upkeep"
