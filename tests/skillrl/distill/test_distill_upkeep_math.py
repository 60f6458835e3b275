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


def test_min_baseline_is_validated():
    with pytest.raises(ValueError, match=r"min_baseline \(0\)"):
        UpkeepConfig(min_baseline=0)


class _Bank:
    """Just what upkeep reads: active entries and the episode totals of their scope."""

    def __init__(self, entries, totals):
        self._entries, self._totals, self.retired = entries, totals, []
        self.trajectories = self  # the bank's trajectory store answers episode_totals

    def list(self, *, status):
        return list(self._entries)

    def episode_totals(self, *, env, category, skills_only):
        return self._totals

    def retire(self, entry_id, *, author, reason):
        self.retired.append(entry_id)


def _seed_entry(entry_id: str, n_with: int, s_with: int):
    from memory.types import Entry

    return Entry(
        kind="task",
        title=entry_id,
        principle="p",
        env="webshop",
        category="fashion",
        id=entry_id,
        episodes_retrieved=n_with,
        success_episodes=s_with,
        failure_episodes=n_with - s_with,
    )


def test_no_retirement_without_episodes_on_both_sides():
    from skillrl.distill.upkeep import upkeep

    # The policy fails everything and every episode retrieved the entry: 0/12 with, 0/0 without.
    # The baseline is only the Laplace prior (0.5), so the -0.38 "utility" is no evidence.
    seed = _seed_entry("seed", 12, 0)
    bank = _Bank([seed], totals=(12, 0))
    report = upkeep(bank)
    assert report.utilities["seed"].utility < UpkeepConfig().retire_below
    assert report.retired == {} and bank.retired == []
    # With enough episodes that ran without it (and succeeded), the same entry is retired.
    bank = _Bank([seed], totals=(22, 8))
    assert list(upkeep(bank).retired) == ["seed"] and bank.retired == ["seed"]
    # min_baseline is the documented knob: 10 episodes without are not enough for 11.
    assert upkeep(_Bank([seed], (22, 8)), UpkeepConfig(min_baseline=11)).retired == {}


def test_an_unmeasured_entry_is_not_ranked_below_measured_ones_under_a_cap():
    from skillrl.distill.upkeep import upkeep

    # Scope: 30 episodes, none succeeded. "busy" was in all 30 (0/0 without: unmeasured, its
    # -0.44 is the prior's 0.5 against 0/30); "weak" was in 10 against 0/20 without (measured,
    # a little below neutral). The cap keeps the unmeasured one and retires the measured one.
    busy, weak = _seed_entry("busy", 30, 0), _seed_entry("weak", 10, 0)
    config = UpkeepConfig(cap_per_category=1, retire_below=-0.9)
    report = upkeep(_Bank([busy, weak], totals=(30, 0)), config, dry_run=True)
    assert report.utilities["busy"].utility < report.utilities["weak"].utility < 0
    assert list(report.retired) == ["weak"] and "over the cap" in report.retired["weak"]


def test_paired_verdict_needs_enough_pairs_or_a_significant_loss_to_retire():
    from memory.types import PairedEvidence
    from skillrl.distill.upkeep import paired_verdict

    config = UpkeepConfig()  # paired_min_pairs 8, paired_retire_at_most 0, paired_alpha 0.05
    assert paired_verdict(PairedEvidence(), config) == "unmeasured"
    assert paired_verdict(PairedEvidence(7, 0, 0, 0.0), config) == "unresolved"
    assert paired_verdict(PairedEvidence(8, 0, 0, 0.0), config) == "does not help"
    assert paired_verdict(PairedEvidence(8, 1, 1, 0.0), config) == "does not help"
    # Six losses in six pairs: p = 2/64 already says it hurts, before paired_min_pairs.
    assert paired_verdict(PairedEvidence(6, 0, 6, -6.0), config) == "does not help"
    assert paired_verdict(PairedEvidence(5, 0, 2, -2.0), config) == "unresolved"
    # A positive difference retires nothing; it protects only once significant.
    assert paired_verdict(PairedEvidence(8, 3, 0, 3.0), config) == "unresolved"
    assert paired_verdict(PairedEvidence(8, 7, 0, 7.0), config) == "helps"


def test_paired_settings_are_validated():
    with pytest.raises(ValueError, match=r"paired_min_pairs \(0\)"):
        UpkeepConfig(paired_min_pairs=0)
    with pytest.raises(ValueError, match=r"paired_alpha \(1.5\)"):
        UpkeepConfig(paired_alpha=1.5)
    with pytest.raises(ValueError, match=r"paired_retire_at_most \(1.0\)"):
        UpkeepConfig(paired_retire_at_most=1.0)


def test_an_entry_without_paired_evidence_is_judged_as_before():
    from memory.types import PairedEvidence
    from skillrl.distill.upkeep import upkeep

    # Observationally harmful and unpaired: the old rule retires it; the same entry with a
    # significant paired win is kept.
    bad = _seed_entry("bad", 12, 0)
    assert list(upkeep(_Bank([bad], totals=(22, 8))).retired) == ["bad"]
    helped = _seed_entry("helped", 12, 0)
    helped.paired_pairs, helped.paired_with_only, helped.paired_score_delta_sum = 8, 7, 7.0
    assert helped.paired == PairedEvidence(8, 7, 0, 7.0)
    assert upkeep(_Bank([helped], totals=(22, 8))).retired == {}
