"""Which goals' failures may evolve the bank: never the held-out test goals."""

from __future__ import annotations

from skillrl_core.splits import TEST_SPLIT
from trainers.config import CycleConfig


def test_validation_goals_evolve_the_bank_when_there_are_any():
    config = CycleConfig(validation_goals=3, validation_split="eval", eval_split=TEST_SPLIT)
    assert config.evolve_goals == ("validation", "eval", 3)


def test_without_validation_goals_test_goals_never_evolve_it():
    assert CycleConfig(validation_goals=0, eval_split=TEST_SPLIT).evolve_goals is None


def test_without_validation_goals_non_test_evaluation_goals_do():
    config = CycleConfig(validation_goals=0, eval_split="eval", eval_goals=7)
    assert config.evolve_goals == ("eval", "eval", 7)
