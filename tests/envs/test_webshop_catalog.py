"""The embedded catalog: size, schema, determinism, near-duplicates; goals and splits."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import envs
from envs.webshop.catalog_gen import write_catalog
from envs.webshop.data import EMBEDDED_ATTRIBUTES, EMBEDDED_PRODUCTS, Catalog, Product, read_json
from envs.webshop.goals import PRICE_RANGE, price_bound, synthetic_goals
from envs.webshop.reward import get_reward


def test_generator_rewrites_the_shipped_files_byte_for_byte(tmp_path):
    written = write_catalog(tmp_path)
    assert [p.read_bytes() for p in written] == [
        EMBEDDED_PRODUCTS.read_bytes(),
        EMBEDDED_ATTRIBUTES.read_bytes(),
    ]
    assert EMBEDDED_PRODUCTS.stat().st_size + EMBEDDED_ATTRIBUTES.stat().st_size < 3_000_000


def test_catalog_is_big_varied_and_in_webshop_schema():
    products = read_json(EMBEDDED_PRODUCTS)
    attributes = read_json(EMBEDDED_ATTRIBUTES)
    assert len(products) >= 1000
    categories = Counter(p["category"] for p in products)
    assert set(categories) == {"fashion", "beauty", "electronics", "furniture", "grocery"}
    assert min(categories.values()) >= 150
    assert sum("instruction" in a for a in attributes.values()) >= 400
    for record in products[:50]:
        assert {
            "asin",
            "name",
            "full_description",
            "small_description",
            "pricing",
            "customization_options",
            "images",
            "category",
            "query",
            "product_category",
        } <= set(record)
        assert record["pricing"].startswith("$")


def test_catalog_has_near_duplicates_that_differ_in_one_thing():
    env = envs.make("webshop")
    by_query = defaultdict(list)
    for product in env.world.catalog.products:
        by_query[product.query].append(product)
    one_attribute = same_but_price = same_but_option = 0
    for group in by_query.values():
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                shared = set(a.attributes) & set(b.attributes)
                if len(shared) == 2 and len(a.attributes) == len(b.attributes) == 3:
                    one_attribute += 1
                if a.attributes == b.attributes:
                    same_but_price += a.options == b.options and a.pricing != b.pricing
                    same_but_option += a.options != b.options
    assert one_attribute >= 300 and same_but_price >= 100 and same_but_option >= 100


def test_every_embedded_goal_is_reachable():
    world = envs.make("webshop").world
    for goal in world.goals:
        product = world.catalog.by_asin[goal.asin]
        result = get_reward(product, goal, world.catalog.prices[goal.asin], dict(goal.goal_options))
        assert result.reward == 1.0, goal.instruction_text


def test_goal_splits_are_fixed_and_documented():
    world = envs.make("webshop").world
    assert len(world.split("test")) == 500 and world.split("test")[0] == 0
    assert world.split("eval") == range(500, 1500)
    assert world.split("train") == range(1500, len(world.goals))
    again = envs.make("webshop", data_seed=0, shuffle_seed=233).world
    assert [g.goal_id for g in again.goals] == [g.goal_id for g in world.goals]
    shuffled = envs.make("webshop", shuffle_seed=1).world
    assert sorted(g.goal_id for g in shuffled.goals) == sorted(g.goal_id for g in world.goals)
    assert [g.goal_id for g in shuffled.goals[:50]] != [g.goal_id for g in world.goals[:50]]


def test_price_bound_is_the_larger_of_two_of_the_next_four_multiples_of_ten():
    rng = random.Random(0)
    for price in (0.5, 12.99, 47.0, 975.0):
        upper, text = price_bound(price, rng)
        above = [p for p in PRICE_RANGE if p > price][:4]
        assert upper in above[1:] and text == f", and price lower than {upper:.2f} dollars"
    assert price_bound(985.0, rng) == (1_000_000.0, "")  # only 990 is left above


def test_synthetic_goals_cover_every_option_combination():
    product = Product(
        asin="B000000001",
        title="Tea Cup",
        description="",
        bullet_points=[""],
        pricing=[5.0],
        price_tag="$5.0",
        options={"size": ["s", "m"], "color": ["red", "blue", "green"]},
        attributes=["fine china"],
        category="home",
        query="cups",
        product_category="",
        name="Tea Cup",
        instruction_text="i want a fine china tea cup",
        instruction_attributes=["fine china"],
    )
    catalog = Catalog([product], {product.asin: product}, {product.asin: 5.0})
    goals = synthetic_goals(catalog, random.Random(0))
    assert len(goals) == 6
    assert goals[0].instruction_text.startswith(
        "i want a fine china tea cup with color: red, and size: s, and price lower than "
    )
    assert goals[0].goal_options == {"color": "red", "size": "s"}
    assert all(g.weight == 1 / 6 for g in goals)
