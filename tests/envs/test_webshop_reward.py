"""Reward cases computed by hand from WebShop's formula:
reward = (attr_matches + option_matches + price_ok) / (n_attrs + n_options + 1) * r_type.
"""

from __future__ import annotations

import pytest

from envs.webshop.data import Product
from envs.webshop.goals import Goal
from envs.webshop.reward import get_reward, normalize_color, token_set_score, type_reward

PATH = "Clothing, Shoes & Jewelry › Men › Clothing › Shirts"


def product(**changes) -> Product:
    fields = dict(
        asin="B000000001",
        title="Acme Slim Fit Dress Shirt Long Sleeve",
        description="A crisp shirt for the office.",
        bullet_points=["Machine wash cold", "Button closure"],
        pricing=[20.0],
        price_tag="$20.0",
        options={"color": ["black", "navy blue"], "size": ["small", "large"]},
        attributes=["slim fit", "long sleeve"],
        category="fashion",
        query="men's dress shirts",
        product_category=PATH,
        name="Acme Slim Fit Dress Shirt Long Sleeve",
    )
    fields.update(changes)
    return Product(**fields)


def goal(**changes) -> Goal:
    fields = dict(
        asin="B000000001",
        category="fashion",
        query="men's dress shirts",
        name="Acme Slim Fit Dress Shirt Long Sleeve",
        product_category=PATH,
        instruction_text="i need a slim fit long sleeve dress shirt",
        attributes=["slim fit", "long sleeve"],
        price_upper=30.0,
        goal_options={"color": "black", "size": "large"},
    )
    fields.update(changes)
    return Goal(**fields)


def test_everything_matches_scores_one():
    result = get_reward(product(), goal(), 20.0, {"color": "black", "size": "large"})
    assert result.reward == 1.0
    b = result.breakdown
    assert b["attributes"] == {"matched": ["slim fit", "long sleeve"], "missed": []}
    assert b["options"]["matched"] == ["black", "large"] and b["options"]["missed"] == []
    assert b["price"] == {"ok": True, "upper_bound": 30.0, "paid": 20.0}
    assert b["type"] == {"query_match": True, "category_match": True, "title_score": 1.0}


def test_partial_match_one_attribute_one_option():
    # attrs 1/2, options 1/2, price ok: (1 + 1 + 1) / (2 + 2 + 1) = 0.6
    bought = product(
        attributes=["slim fit"],
        title="Acme Slim Fit Dress Shirt",
        name="Acme Slim Fit Dress Shirt Long Sleeve",
    )
    result = get_reward(bought, goal(), 20.0, {"color": "black", "size": "small"})
    assert result.reward == pytest.approx(0.6)
    assert result.breakdown["attributes"]["missed"] == ["long sleeve"]
    assert result.breakdown["options"]["missed"] == ["large"]
    assert result.breakdown["options"]["chosen"] == {"color": "black", "size": "small"}


def test_price_over_the_bound_and_no_options_chosen():
    # attrs 2/2, options 0/2, price over: (2 + 0 + 0) / 5 = 0.4
    result = get_reward(product(), goal(), 30.01, {})
    assert result.reward == pytest.approx(0.4)
    assert result.breakdown["price"]["ok"] is False


def test_attribute_found_in_description_when_not_in_attributes():
    bought = product(
        attributes=["cotton"],
        title="Acme Dress Shirt",
        description="Slim cut: slim fit through the chest, long sleeve cuffs.",
    )
    result = get_reward(
        bought, goal(name="Acme Dress Shirt"), 20.0, {"color": "black", "size": "large"}
    )
    assert result.reward == 1.0


def test_fuzzy_attribute_threshold_is_strictly_above_85():
    assert token_set_score("slim-fit", "Slim Fit") == 100
    assert token_set_score("long sleeves", "long sleeve") == 96
    assert token_set_score("x-large", "size large") == 83  # fails the > 85 test
    assert token_set_score("slim", "slim fit") == 100  # a token subset is a full match
    bought = product(
        attributes=["long sleeves", "slimming"],
        title="Acme Shirt",
        name="Acme Shirt",
        description="",
        bullet_points=[""],
    )
    result = get_reward(bought, goal(name="Acme Shirt"), 20.0, {"color": "black", "size": "large"})
    assert result.breakdown["attributes"]["matched"] == ["long sleeve"]
    assert result.reward == pytest.approx(4 / 5)


def test_type_reward_steps():
    # Title-case words count as nouns (spaCy tags them PROPN): 7 nouns here.
    g = goal(name="Acme Slim Fit Dress Shirt Long Sleeve")
    same_kind = product(query="other", product_category="A › B")
    assert type_reward(same_kind, g).r_type == 1.0  # title overlap 7/7 > 0.2
    one_noun = product(query="other", product_category="A › B", name="Zeta Shirt")
    t = type_reward(one_noun, g)
    assert t.title_score == pytest.approx(1 / 7) and t.r_type == 0.5  # 0.1 <= 1/7 <= 0.2
    many = goal(name="Acme Alpha Beta Gamma Delta Epsilon Zeta Eta Theta Iota Kappa Shirt")
    weak = product(query="men's dress shirts", name="Other Shirt")
    t = type_reward(weak, many)
    assert t.title_score == pytest.approx(1 / 12) and t.r_type == 0.1  # under 0.1
    none = product(name="Blender Jar")
    t = type_reward(none, g)
    assert t.title_score == 0.0 and t.r_type == 0.0  # even though the query matches
    assert get_reward(none, g, 20.0, {"color": "black", "size": "large"}).reward == 0.0


def test_category_needs_two_shared_levels():
    g = goal()
    one_level = product(product_category="Clothing, Shoes & Jewelry › Women")
    two_levels = product(product_category="Clothing, Shoes & Jewelry › Men › Shoes")
    assert type_reward(one_level, g).category_match is False
    assert type_reward(two_levels, g).category_match is True


def test_colour_normalisation():
    assert normalize_color("dark navy blue denim") == "blue"  # first colour of the list it contains
    assert normalize_color("99 plain") == "99 plain"
    # Synthetic goals compare (name, value) pairs, as upstream does.
    result = get_reward(
        product(), goal(goal_options={"color": "blue"}), 20.0, {"color": "navy blue"}
    )
    assert result.breakdown["options"]["matched"] == ["blue"]
    # Human goals are plain values, normalised the same way.
    human = goal(goal_options=["light blue", "large"])
    result = get_reward(product(), human, 20.0, {"color": "navy blue", "size": "large"})
    assert result.reward == 1.0


def test_breakdown_is_json_able():
    import json

    result = get_reward(product(), goal(), 20.0, {"color": "black"})
    assert json.loads(json.dumps(result.breakdown))["reward"] == pytest.approx(0.8)
