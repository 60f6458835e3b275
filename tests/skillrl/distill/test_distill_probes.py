from __future__ import annotations

import pytest

from envs.webshop.distill_adapter import faulty_action
from skillrl.distill.probes import FaultyExpertAgent
from skillrl_core.errors import ConfigError

PRODUCT_PAGE = [
    "click[back to search]",
    "click[< prev]",
    "click[small]",
    "click[medium]",
    "click[large]",
    "click[navy]",
    "click[description]",
    "click[buy now]",
]
RESULTS = ["click[back to search]", "click[next >]", "click[b09qkp7xql]", "click[b07hrfsnl4]"]


def test_wrong_option_picks_a_neighbouring_value():
    assert faulty_action("click[large]", PRODUCT_PAGE, "wrong_option") == "click[navy]"
    assert faulty_action("click[navy]", PRODUCT_PAGE, "wrong_option") == "click[large]"
    assert faulty_action("click[medium]", PRODUCT_PAGE, "wrong_option") == "click[large]"


def test_skip_option_buys_at_once_and_hasty_buy_opens_another_result():
    assert faulty_action("click[large]", PRODUCT_PAGE, "skip_option") == "click[buy now]"
    assert faulty_action("click[b09qkp7xql]", RESULTS, "hasty_buy") == "click[b07hrfsnl4]"


def test_unknown_fault_is_refused():
    with pytest.raises(ConfigError, match="fault"):
        FaultyExpertAgent("random", env_id="webshop")


@pytest.mark.slow
def test_faulty_expert_fails_real_webshop_goals_with_precise_notes(bank):
    from skillrl.distill import AnalyticDistiller
    from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine

    starts = [EpisodeStart("webshop", split="train", goal_index=i, seed=i) for i in range(12)]
    records = RolloutEngine(
        FaultyExpertAgent("wrong_option", env_id="webshop"),
        bank=bank,
        config=RolloutConfig(record=True),
    ).run(starts)
    failed = [r for r in records if not r.success]
    assert len(failed) >= 6
    assert all(r.reward_breakdown["options"]["missed"] for r in failed)
    notes = AnalyticDistiller().distill(failed)
    assert notes and all(n.kind == "mistake" for n in notes)
    assert all(n.title.startswith("Select the requested") for n in notes)
    by_id = {r.episode_id: r for r in failed}
    for note in notes:
        missed = by_id[note.trajectory_ids[0]].reward_breakdown["options"]["missed"]
        assert any(value in note.failure_point for value in missed), note.failure_point
    assert any(n.failure_point.startswith("chose ") for n in notes)
