"""The failure classifier labels hand-built WebShop episode records of every class."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envs.webshop.failures import FAILURE_CLASSES, classify_failure, classify_failures
from skillrl_core.records import EpisodeRecord, TurnRecord


def turn(i, action):
    return TurnRecord(
        turn=i, observation="", available_actions=[], action=action, action_valid=True, reward=0.0
    )


def breakdown(*, r_type=1.0, missed_attributes=(), price_ok=True, chosen=None, missed=()):
    wanted = ["grey", "10"]
    chosen = {"color": "grey", "size": "10"} if chosen is None else chosen
    return {
        "r_type": r_type,
        "attributes": {"matched": [], "missed": list(missed_attributes)},
        "options": {
            "matched": [w for w in wanted if w not in missed],
            "missed": list(missed),
            "chosen": chosen,
            "wanted": wanted,
        },
        "price": {"ok": price_ok, "upper_bound": 60.0, "paid": 70.0 if not price_ok else 40.0},
    }


def record(actions, data=None, success=False):
    return EpisodeRecord(
        env_id="webshop",
        goal_id="g",
        instruction="i want grey running shoes",
        category="fashion",
        turns=[turn(i, a) for i, a in enumerate(actions)],
        success=success,
        score=1.0 if success else 0.5,
        reward_breakdown=data,
    )


BOUGHT = ["search[shoes]", "click[b01]", "click[grey]", "click[10]", "click[buy now]"]
LOOP = ["search[shoes]", "click[b01]", "click[back to search]"] * 2 + [
    "search[shoes]",
    "click[b01]",
]
BROWSE = ["search[shoes]", "click[b01]", "click[< prev]", "click[b02]", "click[< prev]",
          "click[b03]", "click[< prev]", "click[next >]"]  # fmt: skip

CASES = [
    ("no_purchase_looping", record(LOOP)),
    ("no_purchase_browsing", record(BROWSE)),
    ("wrong_product_type", record(BOUGHT, breakdown(r_type=0.5))),
    ("wrong_attributes", record(BOUGHT, breakdown(missed_attributes=["non slip"]))),
    ("over_price_bound", record(BOUGHT, breakdown(price_ok=False))),
    ("option_not_chosen", record(BOUGHT, breakdown(chosen={"color": "grey"}, missed=["10"]))),
    (
        "wrong_option",
        record(BOUGHT, breakdown(chosen={"color": "grey", "size": "11"}, missed=["10"])),
    ),
]


@pytest.mark.parametrize(("expected", "episode"), CASES, ids=[c[0] for c in CASES])
def test_each_hand_built_failure_gets_its_class(expected, episode):
    assert classify_failure(episode) == expected
    assert classify_failure(episode.to_dict()) == expected  # the stored form reads the same


def test_a_success_is_no_failure_and_the_table_counts_every_class():
    won = record(BOUGHT, breakdown(), success=True)
    assert classify_failure(won) is None
    table = classify_failures([won] + [episode for _, episode in CASES])
    assert table.episodes == 8 and table.successes == 1
    assert table.counts() == {name: int(name != "other") for name in FAILURE_CLASSES}
    assert sum(count for _, count, _ in table.rows()) == 7


def test_the_first_shortfall_names_the_failure():
    both = breakdown(r_type=0.5, missed_attributes=["x"], price_ok=False, missed=["10"])
    assert classify_failure(record(BOUGHT, both)) == "wrong_product_type"


@given(
    st.lists(st.text(max_size=20), max_size=20),
    st.one_of(st.none(), st.dictionaries(st.text(max_size=8), st.integers(), max_size=4)),
)
def test_any_record_gets_a_known_class(actions, data):
    kind = classify_failure({"success": False, "turns": [{"action": a} for a in actions],
                             "reward_breakdown": data})  # fmt: skip
    assert kind in FAILURE_CLASSES
