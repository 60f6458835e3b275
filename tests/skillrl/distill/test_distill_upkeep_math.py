from __future__ import annotations

import pytest

from memory.stats import utility_from_counts as entry_utility
from skillrl.distill.upkeep import UpkeepConfig


def test_new_entry_is_neutral_under_the_prior():
    assert entry_utility(0, 0, 30, 50, prior_strength=4) == pytest.approx(0.0)


def test_one_bad_episode_barely_moves_it_but_many_do():
    one = entry_utility(0, 1, 30, 50, prior_strength=4)
    many = entry_utility(1, 12, 31, 62, prior_strength=4)
    assert -0.15 < one < 0
    assert many < -0.3


def test_helpful_entry_has_positive_utility():
    assert entry_utility(9, 10, 15, 40, prior_strength=4) > 0.3


def test_config_is_validated():
    with pytest.raises(ValueError, match="retire_below"):
        UpkeepConfig(retire_below=0.2)
