"""WebShop's purchase reward, as ``web_agent_site/engine/goal.py:get_reward`` computes it.

``reward = (attr_matches + option_matches + price_ok) / (n_attrs + n_options + 1) * r_type``

- ``r_type`` (type reward): 1.0, lowered to 0.5 when neither the query, nor two or more category
  levels, nor more than 20 % of the goal title's nouns match; to 0.1 when under 10 % of the nouns
  match; to 0.0 when none does (title nouns: :mod:`envs.webshop.nouns`, a spaCy stand-in).
- attributes: a goal attribute matches when ``token_set_ratio > 85`` against one of the
  product's attributes, else when it is a substring of the title, bullet points or description.
- options: colours are normalised to the first colour word they contain, then each goal option
  matches when ``token_set_ratio > 85`` against one chosen option value. As upstream, synthetic
  goals pass their options as ``(name, value)`` pairs, which thefuzz compares as the string
  ``"('name', 'value')"``; we keep that quirk so that scores agree with the original.
- price: ``paid <= price_upper``.

``token_set_ratio`` is thefuzz's (ascii-only, lowercased, punctuation stripped, rounded to an
integer), computed with rapidfuzz, which thefuzz itself wraps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz, utils

from envs.webshop.data import Product
from envs.webshop.goals import Goal
from envs.webshop.nouns import title_nouns

FUZZY_THRESHOLD = 85
COLOR_SET = (
    "alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze "
    "brown burgundy camel camo caramel champagne charcoal cheetah chestnut chocolate christmas "
    "coffee cognac copper coral cranberry cream crystal dark denim eggplant elephant espresso "
    "fuchsia gold granite grape graphite grass gray green grey heather indigo ivory ivy khaki "
    "lavender lemon leopard light lilac lime magenta maroon mauve merlot midnight mint mocha "
    "multicolor mushroom mustard natural navy nude olive orange peach pewter pink plum purple "
    "rainbow red rose royal rust sand sapphire seashell silver skull slate steel stone stonewash "
    "sunflower tan taupe teal tiger turquoise violet walnut wheat white wine yellow"
).split()
_NON_ASCII = {i: None for i in range(128, 256)}


def token_set_score(a: object, b: object) -> int:
    """Thefuzz's ``token_set_ratio(a, b)``: 0-100, integer."""
    first = utils.default_process(str(a).translate(_NON_ASCII))
    second = utils.default_process(str(b).translate(_NON_ASCII))
    if not first or not second:
        return 0
    return int(round(fuzz.token_set_ratio(first, second)))


def normalize_color(value: str | tuple[str, str]) -> str | tuple[str, str]:
    """Return the first colour of :data:`COLOR_SET` in ``value``, else ``value`` itself."""
    for color in COLOR_SET:
        if color in value:
            return color
    return value


@dataclass(frozen=True)
class TypeReward:
    """The type reward and what decided it."""

    r_type: float
    query_match: bool
    category_match: bool
    title_score: float


def type_reward(product: Product, goal: Goal) -> TypeReward:
    """Score whether the purchase is the right kind of product (query, category, title)."""
    query_match = product.query == goal.query
    bought_path = {x.strip() for x in product.product_category.split("›")}
    goal_path = {x.strip() for x in goal.product_category.split("›")}
    category_match = len(bought_path & goal_path) >= 2
    desired = title_nouns(goal.name)
    bought = title_nouns(product.name)
    title_score = 0.2 if not desired else len(set(bought) & set(desired)) / len(desired)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return TypeReward(r_type, query_match, category_match, title_score)


def attribute_matches(product: Product, goal_attributes: list[str]) -> list[bool]:
    """For each goal attribute, whether the product has it (fuzzy attribute, else in its text)."""
    title = product.title.lower()
    bullets = " ".join(product.bullet_points).lower()
    description = product.description.lower()
    result = []
    for wanted in goal_attributes:
        hit = any(token_set_score(have, wanted) > FUZZY_THRESHOLD for have in product.attributes)
        hit = hit or wanted in title or wanted in bullets or wanted in description
        result.append(hit)
    return result


def option_matches(
    chosen_values: list[str], goal_options: list[str] | list[tuple[str, str]]
) -> list[bool]:
    """For each goal option (value or ``(name, value)`` pair), whether a chosen value fits."""
    chosen = [normalize_color(value) for value in chosen_values]
    return [
        any(token_set_score(have, normalize_color(wanted)) > FUZZY_THRESHOLD for have in chosen)
        for wanted in goal_options
    ]


@dataclass(frozen=True)
class RewardResult:
    """The purchase reward and its JSON-able explanation (see docs/ARCHITECTURE.md)."""

    reward: float
    breakdown: dict[str, Any]


def get_reward(product: Product, goal: Goal, price: float, options: dict[str, str]) -> RewardResult:
    """Score buying ``product`` at ``price`` with chosen ``options`` against ``goal``."""
    kind = type_reward(product, goal)
    attrs = attribute_matches(product, goal.attributes)
    goal_options = (
        list(goal.goal_options.items())
        if isinstance(goal.goal_options, dict)
        else goal.goal_options
    )
    opts = option_matches(list(options.values()), goal_options)
    price_ok = price <= goal.price_upper
    total = (sum(attrs) + sum(opts) + price_ok) / (len(goal.attributes) + len(goal_options) + 1)
    reward = total * kind.r_type
    wanted = goal.wanted_options
    breakdown = {
        "reward": reward,
        "r_type": kind.r_type,
        "type": {
            "query_match": kind.query_match,
            "category_match": kind.category_match,
            "title_score": kind.title_score,
        },
        "attributes": {
            "matched": [a for a, ok in zip(goal.attributes, attrs, strict=True) if ok],
            "missed": [a for a, ok in zip(goal.attributes, attrs, strict=True) if not ok],
        },
        "options": {
            "matched": [w for w, ok in zip(wanted, opts, strict=True) if ok],
            "missed": [w for w, ok in zip(wanted, opts, strict=True) if not ok],
            "chosen": dict(options),
            "wanted": list(wanted),
        },
        "price": {"ok": price_ok, "upper_bound": goal.price_upper, "paid": price},
        "goal": goal.describe(),
        "purchased": {
            "asin": product.asin,
            "title": product.title,
            "category": product.category,
            "price": price,
            "options": dict(options),
        },
    }
    return RewardResult(reward=reward, breakdown=breakdown)
