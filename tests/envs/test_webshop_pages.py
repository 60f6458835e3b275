"""Every page transition, in both observation modes."""

from __future__ import annotations

import envs
from envs.webshop.pages import PER_PAGE


def _goal_product(env):
    return env.world.catalog.by_asin[env.goal.asin]


def _to_item(env, query="search[{q}]"):
    env.reset(options={"split": "test", "goal_index": 0})
    product = _goal_product(env)
    env.step(query.format(q=product.query))
    asin = product.asin.lower()
    # Walk the pages until the target shows up (it is in the top 50 for its own query).
    for _ in range(5):
        if f"click[{asin}]" in env.available_actions():
            return env.step(f"click[{asin}]"), product
        env.step("click[next >]")
    raise AssertionError("target not found in 50 results")


def test_search_page_text_mode(webshop):
    obs, info = webshop.reset(options={"split": "test", "goal_index": 0})
    assert obs == f"WebShop [SEP] Instruction: [SEP] {info['instruction']} [SEP] Search"
    assert info["available_actions"] == ["search[<query>]"]
    assert info["page"] == "search"


def test_results_pages_next_and_prev(webshop):
    _, info = webshop.reset(options={"split": "test", "goal_index": 0})
    obs, reward, terminated, truncated, info = webshop.step("search[black shirt]")
    assert (reward, terminated, truncated, info["action_valid"]) == (0.0, False, False, True)
    parts = obs.split(" [SEP] ")
    assert parts[:5] == [
        "Instruction:",
        info["instruction"],
        "Back to Search",
        "Page 1 (Total results: 50)",
        "Next >",
    ]
    products = [
        a for a in info["available_actions"] if a not in ("click[back to search]", "click[next >]")
    ]
    assert len(products) == PER_PAGE
    assert "click[< prev]" not in info["available_actions"]
    obs2, *_, info2 = webshop.step("click[next >]")
    assert "Page 2 (Total results: 50)" in obs2 and "< Prev" in obs2
    assert "click[< prev]" in info2["available_actions"]
    assert set(info2["available_actions"]).isdisjoint(products)
    obs3, *_ = webshop.step("click[< prev]")
    assert obs3 == obs


def test_results_are_capped_at_50(webshop):
    webshop.reset(options={"split": "test", "goal_index": 0})
    for _ in range(5):
        webshop.step("search[black shirt]") if _ == 0 else webshop.step("click[next >]")
    obs, *_, info = webshop.step("click[next >]")
    # Page 6 exists (the original always shows Next >) but lists nothing.
    assert "Page 6 (Total results: 50)" in obs
    assert info["available_actions"] == ["click[back to search]", "click[< prev]", "click[next >]"]


def test_item_page_options_and_sub_pages():
    env = envs.make("webshop", show_attrs=True)
    (obs, _, _, _, info), product = _to_item(env)
    assert info["page"] == "item"
    assert f"{product.title} [SEP] Price: {product.price_tag} [SEP] Rating: N.A." in obs
    for name, values in product.options.items():
        assert " [SEP] ".join([name, *values]) in obs
        assert all(f"click[{v}]" in info["available_actions"] for v in values)
    for button in (
        "back to search",
        "< prev",
        "description",
        "features",
        "reviews",
        "attributes",
        "buy now",
    ):
        assert f"click[{button}]" in info["available_actions"]
    value = next(iter(product.options.values()))[0]
    env.step(f"click[{value}]")
    obs, *_ = env.step("click[description]")
    assert obs.endswith(f"< Prev [SEP] {product.description}")
    assert env.available_actions() == ["click[back to search]", "click[< prev]"]
    env.step("click[< prev]")
    obs, *_ = env.step("click[features]")
    assert obs.endswith(" [SEP] ".join(product.bullet_points))
    env.step("click[< prev]")
    obs, *_ = env.step("click[reviews]")
    assert obs.endswith("Back to Search [SEP] < Prev")
    env.step("click[< prev]")
    obs, *_ = env.step("click[attributes]")
    assert " [SEP] ".join(product.attributes) in obs and product.product_category in obs
    obs, *_, info = env.step("click[< prev]")
    assert info["page"] == "item"
    # The option chosen before visiting sub-pages is still chosen when buying.
    *_, info = env.step("click[buy now]")
    assert info["reward_breakdown"]["purchased"]["options"] == {next(iter(product.options)): value}


def test_attributes_button_is_hidden_by_default(webshop):
    (obs, *_, info), _ = _to_item(webshop)
    assert "click[attributes]" not in info["available_actions"]
    assert "Attributes" not in obs.split(" [SEP] ")


def test_prev_from_item_returns_to_results_and_resets_options(webshop):
    (_, *_, info), product = _to_item(webshop)
    value = next(iter(product.options.values()))[0]
    webshop.step(f"click[{value}]")
    obs, *_, info = webshop.step("click[< prev]")
    assert info["page"] == "results"
    webshop.step(f"click[{product.asin.lower()}]")
    *_, info = webshop.step("click[buy now]")
    assert info["reward_breakdown"]["purchased"]["options"] == {}


def test_back_to_search_from_every_page(webshop):
    webshop.reset(options={"split": "test", "goal_index": 0})
    search_obs = webshop.observation()
    webshop.step("search[tea]")
    obs, *_, info = webshop.step("click[back to search]")
    assert obs == search_obs and info["available_actions"] == ["search[<query>]"]
    (_, *_), _ = _to_item(webshop)
    webshop.step("click[features]")
    obs, *_ = webshop.step("click[back to search]")
    assert obs == search_obs


def test_buy_now_ends_the_episode_with_a_breakdown(webshop):
    (_, *_), product = _to_item(webshop)
    goal = webshop.goal
    for value in goal.wanted_options:
        webshop.step(f"click[{value}]")
    obs, reward, terminated, truncated, info = webshop.step("click[buy now]")
    assert terminated and not truncated and info["page"] == "done"
    assert obs.startswith("Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0)")
    assert reward == info["reward_breakdown"]["reward"] == 1.0 and info["success"]
    breakdown = info["reward_breakdown"]
    assert set(breakdown) == {
        "reward",
        "r_type",
        "type",
        "attributes",
        "options",
        "price",
        "goal",
        "purchased",
    }
    assert breakdown["purchased"]["asin"] == product.asin == breakdown["goal"]["asin"]
    after = webshop.step("click[buy now]")
    assert after[1] == 0.0 and after[2] is True and after[4]["action_valid"] is False


def test_text_rich_marks_buttons_clicked_options_and_visited_products():
    env = envs.make("webshop", observation_mode="text_rich")
    (obs, *_), product = _to_item(env)
    assert "[button] Buy Now [button_]" in obs
    value = next(iter(product.options.values()))[0]
    obs, *_ = env.step(f"click[{value}]")
    assert obs.startswith(f"You have clicked {value}.\n")
    assert f"  [clicked button] {value} [clicked button_]" in obs
    obs, *_ = env.step("click[< prev]")
    assert f"\n[clicked button] {product.asin} [clicked button_]" in obs
    assert "[button] Next > [button_]" in obs
