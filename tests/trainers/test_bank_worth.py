"""``--compare-starting-bank``: each later evaluation is replayed with the bank as it was at
cycle 0, and the two plays are paired goal by goal."""

from __future__ import annotations

import json

import pytest
from test_checkpoint_choice import open_scripted_run

from memory.types import EntryDraft
from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord
from trainers.cycle.config import CycleConfig
from trainers.cycle.cycle import STARTING_BANK_EPISODES, snapshot_name
from trainers.cycle.cycle_metrics import BankWorth, CycleMetrics


def outcome(success: bool) -> EpisodeRecord:
    return EpisodeRecord(
        env_id="webshop", goal_id="g", instruction="i", category="c", turns=[],
        success=success, score=float(success),
    )  # fmt: skip


def test_bank_worth_pairs_the_starting_bank_with_the_evolved_one_and_reads_back():
    starting = [outcome(s) for s in (True, False, False, True)]
    evolved = [outcome(s) for s in (True, True, True, False)]
    worth = BankWorth.of(starting, evolved)
    assert (worth.goals, worth.starting_successes, worth.evolved_successes) == (4, 2, 3)
    assert (worth.won, worth.lost) == (2, 1)
    row = CycleMetrics(cycle=2, bank_worth=worth).to_row()
    assert row["bank_worth.won"] == 2
    assert CycleMetrics.from_row(row).bank_worth == worth


def test_the_comparison_needs_skills_and_evaluation_goals():
    with pytest.raises(ConfigError, match="compare_starting_bank"):
        CycleConfig(compare_starting_bank=True, skills=False)
    with pytest.raises(ConfigError, match="eval_goals 0"):
        CycleConfig(compare_starting_bank=True, eval_goals=0)


@pytest.mark.slow
def test_later_evaluations_replay_with_the_cycle_0_bank_and_never_see_later_entries(tmp_path):
    config = CycleConfig(
        cycles=2,
        goals_per_cycle=1,
        group_size=2,
        eval_goals=2,
        eval_split="eval",
        validation_goals=1,
        compare_starting_bank=True,
        max_turns=3,
        max_new_tokens=16,
        seed=5,
        max_topup_rounds=0,
        dynamic_sampling=False,
    )
    run, bank = open_scripted_run(tmp_path, config)
    distill = run._distill
    marker_title = "Added after cycle 0: only the evolved bank holds this case"

    def distill_and_mark(cycle, state):
        distill(cycle, state)
        if cycle == 1:  # a case for the first evaluation goal's very request
            first = json.loads((run.files.cycle_dir(0) / "eval.json").read_text())["episodes"][0]
            case = EntryDraft(
                kind="case",
                title=marker_title,
                principle="search the request's words; buy the first result",
                when_to_apply=first["instruction"],
                env="webshop",
                category=first["category"],
            )
            bank.add(case)

    run._distill = distill_and_mark
    state = run.run()
    files = run.files
    starting_ids = {e.id for e in bank.snapshots.entries(snapshot_name(files.root.name, 0))}
    marker = next(e.id for e in bank.list(kind="case") if e.title == marker_title)
    bank.close()
    assert marker not in starting_ids
    rows = {r["cycle"]: CycleMetrics.from_row(r) for r in state.history}
    assert rows[0].bank_worth is None  # cycle 0's bank is the starting bank
    for cycle in (1, 2):
        worth = rows[cycle].bank_worth
        assert worth is not None and worth.goals == 2
        replay = json.loads((files.cycle_dir(cycle) / f"{STARTING_BANK_EPISODES}.json").read_text())
        retrieved = {i for e in replay["episodes"] for t in e["turns"] for i in t["retrieved_ids"]}
        assert retrieved and retrieved <= starting_ids  # only entries the cycle-0 bank held
        evolved = json.loads((files.cycle_dir(cycle) / "eval.json").read_text())["episodes"]
        assert worth.evolved_successes == sum(bool(e["success"]) for e in evolved)
        assert worth.starting_successes == sum(bool(e["success"]) for e in replay["episodes"])
        assert marker in {i for e in evolved for t in e["turns"] for i in t["retrieved_ids"]}
    assert (files.starting_bank / "bank.sqlite").is_file()
    assert not files.starting_bank.with_name("starting_bank.tmp").exists()
