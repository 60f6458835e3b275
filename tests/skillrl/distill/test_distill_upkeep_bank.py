from __future__ import annotations

import pytest
from distill_episodes import episode

from memory.stats import ScopeTotals, entry_utility
from memory.types import EntryDraft
from skillrl.distill import UpkeepConfig, upkeep

pytestmark = pytest.mark.slow


def _note(bank, title: str, principle: str) -> str:
    draft = EntryDraft(
        kind="mistake",
        title=title,
        principle=principle,
        env="webshop",
        category="fashion",
        failure_point="f",
        flawed_action="a",
        correction="c",
    )
    return bank.add(draft, author="test").entry.id


def _played(success: bool, retrieved: list[str]):
    ep = episode(success=success, chosen={"size": "large", "color": "navy"})
    for turn in ep.turns:
        turn.retrieved_ids = list(retrieved)
    return ep


def test_low_utility_entry_is_retired_after_enough_evidence_then_restored(bank):
    bad = _note(bank, "Always click the first result", "Open the first result and buy it.")
    good = _note(bank, "Select the requested size", "Click the size the instruction names.")
    # 3 episodes are not enough evidence to judge (min_evidence 8), however bad they look.
    bank.trajectories.save_episodes(
        [_played(False, [bad]) for _ in range(3)] + [_played(True, [good]) for _ in range(6)]
    )
    assert upkeep(bank).retired == {}
    bank.trajectories.save_episodes(
        [_played(False, [bad]) for _ in range(6)] + [_played(True, [good]) for _ in range(4)]
    )
    report = upkeep(bank)
    assert list(report.retired) == [bad]
    assert "0/9 episodes succeeded with it, 10/10 without" in report.retired[bad]
    assert report.utilities[good].utility > 0
    retired = bank.get(bad)
    assert retired.status == "retired"
    assert bad not in {e.id for e in bank.list()}
    assert bank.history(bad)[-1].author == "upkeep"
    assert bank.restore(bad, author="person", reason="give it another chance").status == "active"


def test_a_case_is_never_retired_on_the_episodes_that_happened_to_retrieve_it(bank):
    case = bank.add(
        EntryDraft(
            kind="case",
            title="A request like this was solved by click[b0aaaaaaaa]",
            principle="search the request's words; open b0aaaaaaaa; choose large, navy; buy",
            when_to_apply="i need a large navy dress shirt",
            env="webshop",
            category="fashion",
        ),
        author="test",
    ).entry.id
    good = _note(bank, "Select the requested size", "Click the size the instruction names.")
    # The case's request is a hard one: every episode that retrieved it failed.
    bank.trajectories.save_episodes(
        [_played(False, [case]) for _ in range(9)] + [_played(True, [good]) for _ in range(10)]
    )
    report = upkeep(bank)
    assert report.utilities[case].utility < UpkeepConfig().retire_below  # it looks harmful
    assert case not in report.retired and bank.get(case).status == "active"


def test_retired_entry_comes_back_by_reverting_to_its_last_active_revision(bank):
    bad = _note(bank, "Always click the first result", "Open the first result and buy it.")
    bank.trajectories.save_episodes(
        [_played(False, [bad]) for _ in range(8)] + [_played(True, []) for _ in range(8)]
    )
    upkeep(bank)
    active_revision = bank.history(bad)[-2].revision
    assert bank.revert(bad, active_revision, author="person").status == "active"


def test_expert_episodes_without_skills_do_not_count_against_entries(bank):
    entry = _note(bank, "Select the requested size", "Click the size the instruction names.")
    bank.trajectories.save_episodes(
        [_played(True, [entry]) for _ in range(4)] + [_played(False, [entry]) for _ in range(4)]
    )
    experts = [_played(True, []) for _ in range(40)]
    for ep in experts:
        ep.skills_enabled = False
    bank.trajectories.save_episodes(experts)
    report = upkeep(bank)
    assert report.retired == {}
    # `skillrl skills list --sort utility` shows the very number upkeep judged by.
    stored = bank.get(entry)
    assert entry_utility(stored, ScopeTotals(bank).of(stored)) == report.utilities[entry].utility


def test_cap_per_category_retires_the_weakest(bank):
    ids = [
        _note(bank, f"Note {word}", f"A distinct principle about {word} handling.")
        for word in ("colors", "sizes", "prices", "brands")
    ]
    # Evidence on both sides for ids[0] (8/8 with, 0/8 without) and ids[1] (0/8 with, 8/8
    # without); the weak one is not the newest, so creation order cannot pick it by accident.
    bank.trajectories.save_episodes(
        [_played(True, [ids[0]]) for _ in range(8)] + [_played(False, [ids[1]]) for _ in range(8)]
    )
    config = UpkeepConfig(cap_per_category=3, retire_below=-0.9)  # only the cap retires here
    report = upkeep(bank, config, dry_run=True)
    assert list(report.retired) == [ids[1]] and "over the cap of 3" in report.retired[ids[1]]
    assert bank.count() == 4  # dry run changed nothing
    upkeep(bank, config)
    assert bank.count() == 3 and bank.get(ids[1]).status == "retired"


def test_entries_of_a_policy_that_fails_everything_are_not_retired(bank):
    seeded = _note(bank, "Select the requested size", "Click the size the instruction names.")
    bank.trajectories.save_episodes([_played(False, [seeded]) for _ in range(12)])
    report = upkeep(bank)
    assert report.utilities[seeded].n_without == 0 and report.retired == {}
    assert bank.get(seeded).status == "active"
