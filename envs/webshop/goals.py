"""Goals (what to buy) and the fixed splits, built as ``engine/goal.py`` builds them.

Synthetic goals: for every product with an instruction, one goal per combination of its option
values (option groups in sorted order), with instruction ``"{instruction} with {name}: {value},
and {name}: {value}, and price lower than {upper:.2f} dollars"``. Human goals: one per entry of
``items_human_ins.json`` that names at least one attribute. The price upper bound is the larger
of two multiples of 10 drawn from the four just above the product's price (no bound, 1,000,000,
when fewer than two exist below 1,000).

Splits: goals are shuffled with ``random.Random(shuffle_seed)`` (233, as upstream), then
test = goals 0-499, eval = 500-1499, train = 1500 onwards (the original baselines' split).
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from envs.webshop.data import Catalog, Product

PRICE_RANGE = [10.0 * i for i in range(1, 100)]
NO_PRICE_BOUND = 1_000_000.0
SPLITS: dict[str, tuple[int, int | None]] = {
    "test": (0, 500),
    "eval": (500, 1500),
    "train": (1500, None),
}


@dataclass(frozen=True)
class Goal:
    """One shopping goal: the target product, the instruction, what must match."""

    asin: str
    category: str
    query: str
    name: str
    """Title of the target product (the type reward compares title nouns)."""
    product_category: str
    instruction_text: str
    attributes: list[str]
    price_upper: float
    goal_options: dict[str, str] | list[str]
    """Synthetic goals: ``{option name: value}``; human goals: a list of option values."""
    weight: float = 1.0

    @property
    def goal_id(self) -> str:
        """Stable id: the target ASIN plus a hash of the instruction."""
        digest = hashlib.sha1(self.instruction_text.encode("utf-8")).hexdigest()[:10]
        return f"{self.asin}-{digest}"

    @property
    def wanted_options(self) -> list[str]:
        """The option values the goal asks for."""
        if isinstance(self.goal_options, dict):
            return list(self.goal_options.values())
        return list(self.goal_options)

    def describe(self) -> dict[str, Any]:
        """JSON-able summary (the ``goal`` part of a reward breakdown)."""
        return {
            "asin": self.asin,
            "instruction": self.instruction_text,
            "category": self.category,
            "attributes": list(self.attributes),
            "options": self.wanted_options,
            "price_upper": self.price_upper,
        }

    def public(self) -> dict[str, Any]:
        """Return what an agent may be told about the goal (no target ASIN)."""
        return {
            "instruction": self.instruction_text,
            "attributes": list(self.attributes),
            "options": self.wanted_options,
            "price_upper": self.price_upper,
        }


def price_bound(price: float, rng: random.Random) -> tuple[float, str]:
    """Draw the goal's price upper bound and its instruction suffix."""
    candidates = [p for p in PRICE_RANGE if p > price][:4]
    if len(candidates) < 2:
        return NO_PRICE_BOUND, ""
    _, upper = sorted(rng.sample(candidates, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


def _synthetic_for(product: Product, price: float, rng: random.Random) -> list[Goal]:
    upper, price_text = price_bound(price, rng)
    names = sorted(product.options)
    goals = []
    for combination in itertools.product(*(product.options[n] for n in names)):
        chosen = dict(zip(names, combination, strict=True))
        option_text = ", and ".join(f"{k}: {v}" for k, v in chosen.items())
        option_text = f" with {option_text}" if option_text else ""
        goals.append(
            Goal(
                asin=product.asin,
                category=product.category,
                query=product.query,
                name=product.title,
                product_category=product.product_category,
                instruction_text=f"{product.instruction_text}{option_text}{price_text}",
                attributes=list(product.instruction_attributes or []),
                price_upper=upper,
                goal_options=chosen,
            )
        )
    return goals


def synthetic_goals(catalog: Catalog, rng: random.Random) -> list[Goal]:
    """Goals from products' instructions times their option combinations, weighted as upstream."""
    goals: list[Goal] = []
    for product in catalog.products:
        if product.instruction_text is None:
            continue
        goals += _synthetic_for(product, catalog.prices[product.asin], rng)
    counts: dict[str, int] = defaultdict(int)
    for goal in goals:
        for attribute in goal.attributes:
            counts[attribute] += 1
    return [
        _with_weight(g, sum(1.0 / counts[a] for a in g.attributes) / len(g.attributes))
        for g in goals
    ]


def _with_weight(goal: Goal, weight: float) -> Goal:
    return Goal(**{**goal.__dict__, "weight": weight})


def human_goals(catalog: Catalog, rng: random.Random) -> list[Goal]:
    """Goals from human instructions (entries without attributes are skipped, as upstream)."""
    goals: list[Goal] = []
    for product in catalog.products:
        for entry in product.human_instructions:
            if not entry.attributes:
                continue
            upper, price_text = price_bound(catalog.prices[product.asin], rng)
            goals.append(
                Goal(
                    asin=product.asin,
                    category=product.category,
                    query=product.query,
                    name=product.name,
                    product_category=product.product_category,
                    instruction_text=entry.instruction.strip(".") + price_text,
                    attributes=list(entry.attributes),
                    price_upper=upper,
                    goal_options=list(entry.options),
                )
            )
    return goals


def build_goals(catalog: Catalog, *, human: bool, seed: int, shuffle_seed: int) -> list[Goal]:
    """All goals in split order: built (price bounds seeded by ``seed``), then shuffled."""
    rng = random.Random(f"goals-{seed}")
    goals = human_goals(catalog, rng) if human else synthetic_goals(catalog, rng)
    random.Random(shuffle_seed).shuffle(goals)
    return goals


def split_bounds(split: str, total: int) -> range:
    """Goal indices of a split (test 0-499, eval 500-1499, train 1500-end)."""
    if split not in SPLITS:
        raise KeyError(split)
    start, stop = SPLITS[split]
    return range(min(start, total), total if stop is None else min(stop, total))
