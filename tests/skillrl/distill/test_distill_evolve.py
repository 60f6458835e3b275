from __future__ import annotations

import pytest
from distill_episodes import episode

from skillrl.distill import AnalyticDistiller, EvolveConfig, evolve_from_validation

pytestmark = pytest.mark.slow


def _wrong_size(split: str, category: str = "fashion", wanted: str = "large"):
    return episode(
        success=False,
        chosen={"size": "small", "color": "navy"},
        missed_options=[wanted],
        split=split,
        category=category,
    )


def test_weak_category_gets_notes_from_its_failed_training_episodes_only(bank):
    training = [_wrong_size("train") for _ in range(3)]
    training.append(
        episode(
            success=False, chosen={"size": "large", "color": "navy"}, price_ok=False, split="train"
        )
    )
    training.append(_wrong_size("train", category="beauty"))
    validation = [_wrong_size("eval") for _ in range(4)]
    validation.append(episode(success=True, chosen={"size": "large"}, split="eval"))
    validation += [
        episode(success=True, chosen={"size": "large"}, split="eval", category="beauty")
        for _ in range(2)
    ]
    bank.trajectories.save_episodes(training + validation)

    report = evolve_from_validation(
        bank, AnalyticDistiller(), validation, EvolveConfig(threshold=0.5, max_new_entries=1)
    )
    assert report.healthy == {"webshop/beauty": 1.0}
    [fashion] = report.evolved
    assert (fashion.category, fashion.validation_episodes, fashion.validation_successes) == (
        "fashion",
        5,
        1,
    )
    assert fashion.failures_analysed == 4
    [entry_id] = fashion.added  # max_new_entries=1: the note explaining most failures
    entry = bank.get(entry_id)
    assert entry.title == "Select the requested size before Buy Now"
    assert set(entry.trajectory_ids) == {e.episode_id for e in training[:3]}
    assert not {e.episode_id for e in validation} & set(entry.trajectory_ids)
    revision = bank.history(entry_id)[0]
    assert revision.author == "evolution"
    assert "validation success 1/5 (0.20) < 0.50 in webshop/fashion" in revision.reason
    assert "explains 3 of 4 failed training episodes" in revision.reason

    again = evolve_from_validation(
        bank, AnalyticDistiller(), validation, EvolveConfig(threshold=0.5, max_new_entries=1)
    )
    assert again.evolved[0].refined == [entry_id] and again.evolved[0].added == []
    assert bank.get(entry_id).support_count == 2


def test_no_training_failures_means_nothing_is_added(bank):
    validation = [_wrong_size("eval") for _ in range(3)]
    bank.trajectories.save_episodes(validation)
    report = evolve_from_validation(bank, AnalyticDistiller(), validation)
    assert (
        report.evolved[0].added == [] and "no failed training episodes" in report.evolved[0].reason
    )
    assert bank.count() == 0
