"""The environments' distill adapters: typed breakdowns read back, leak patterns on any text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from test_webshop_reward import goal, product

import envs
from envs.sokoban.outcome import SokobanStepOutcome
from envs.webshop.purchase import WebShopPurchase
from envs.webshop.reward import get_reward


def test_the_purchase_is_read_back_from_get_rewards_breakdown():
    result = get_reward(product(), goal(), 30.01, {"size": "large"})
    purchase = WebShopPurchase.from_dict(result.breakdown)
    assert purchase.reward == result.reward and purchase.type_matched
    assert (purchase.price_ok, purchase.price_upper, purchase.paid) == (False, 30.0, 30.01)
    assert purchase.options_chosen == {"size": "large"}
    assert (purchase.options_matched, purchase.options_missed) == (("large",), ("black",))
    assert purchase.purchased_id == "B000000001"
    explained = purchase.explain()
    assert "- price within the bound: no" in explained
    assert "30" not in explained and "B000000001" not in explained


def test_a_sokoban_outcome_survives_its_json_form():
    outcome = SokobanStepOutcome(
        action="left", valid=True, moved=True, pushed=True, box_from=(1, 2), box_to=(1, 1),
        num_boxes=1, step_cost=-0.1, reward=-0.1, deadlock=True, deadlock_kind="corner",
    )  # fmt: skip
    assert SokobanStepOutcome.from_dict(outcome.to_dict()) == outcome
    assert SokobanStepOutcome.from_dict({**outcome.to_dict(), "future_key": 1}) == outcome


@given(
    text=st.text(alphabet="abcdefghijklmnopqrstuvwxyz ,.'-", max_size=300),
    env_id=st.sampled_from(["webshop", "sokoban"]),
)
def test_prose_without_digits_or_grid_symbols_never_leaks(text, env_id):
    adapter = envs.distill_adapter_for(env_id)
    assert not any(leak.pattern.search(text) for leak in adapter.leak_patterns)


@given(
    before=st.text(alphabet="abc ,.", max_size=40),
    tail=st.text("abcdefghij0123456789", min_size=8, max_size=8),
)
def test_any_product_id_leaks(before, tail):
    adapter = envs.distill_adapter_for("webshop")
    text = f"{before} b0{tail} "
    assert any(leak.pattern.search(text) for leak in adapter.leak_patterns)


@given(
    before=st.text(alphabet="abc ,.", max_size=40),
    row=st.integers(0, 11),
    column=st.integers(0, 11),
)
def test_any_sokoban_coordinate_leaks(before, row, column):
    adapter = envs.distill_adapter_for("sokoban")
    text = f"{before} row {row}, column {column}"
    assert any(leak.pattern.search(text) for leak in adapter.leak_patterns)
