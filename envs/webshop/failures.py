"""Why a WebShop episode failed, read from its record: one class per failed episode.

The classes follow WebShop's reward (:func:`envs.webshop.reward.get_reward`): an episode that
bought something carries the purchase's breakdown (type reward, attributes, options, price), so
the first part of the reward that fell short names the failure, in the order a shopper goes
wrong: the product type, then the product's attributes (a near-duplicate of the right one), then
the price bound, then the options (none chosen where the goal wanted one, or a wrong value). An
episode that never bought ran out of turns; its actions say whether it looped (its second half only
repeats actions of its first half) or kept browsing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillrl_core.records import EpisodeRecord

FAILURE_CLASSES: tuple[str, ...] = (
    "no_purchase_looping",
    "no_purchase_browsing",
    "wrong_product_type",
    "wrong_attributes",
    "over_price_bound",
    "option_not_chosen",
    "wrong_option",
    "other",
)
"""Every class :func:`classify_failure` returns, in the order they are checked."""

FAILURE_LABELS: dict[str, str] = {
    "no_purchase_looping": "no purchase: ran out of turns repeating actions",
    "no_purchase_browsing": "no purchase: ran out of turns browsing",
    "wrong_product_type": "bought the wrong product type",
    "wrong_attributes": "right type, wrong attributes (a near-duplicate)",
    "over_price_bound": "right product, over the price bound",
    "option_not_chosen": "right product, a wanted option not chosen",
    "wrong_option": "right product, a wrong option value",
    "other": "other",
}
"""One line per class, for tables."""


def classify_failure(record: EpisodeRecord | dict[str, Any]) -> str | None:
    """Return the failure class of an episode record (an ``EpisodeRecord`` or its dict).

    None for a successful episode.
    """
    data = record.to_dict() if hasattr(record, "to_dict") else record
    if data.get("success"):
        return None
    breakdown = data.get("reward_breakdown")
    if not breakdown:
        actions = [t.get("action", "") for t in data.get("turns", [])]
        return "no_purchase_looping" if _loops(actions) else "no_purchase_browsing"
    r_type = breakdown.get("r_type", 1.0)
    if isinstance(r_type, int | float) and r_type < 1.0:
        return "wrong_product_type"
    if _part(breakdown, "attributes").get("missed"):
        return "wrong_attributes"
    if _part(breakdown, "price").get("ok", True) is False:
        return "over_price_bound"
    options = _part(breakdown, "options")
    if options.get("missed"):
        chosen, wanted = options.get("chosen") or {}, options.get("wanted") or []
        return "option_not_chosen" if len(chosen) < len(wanted) else "wrong_option"
    return "other"


def _part(breakdown: dict[str, Any], key: str) -> dict[str, Any]:
    value = breakdown.get(key)
    return value if isinstance(value, dict) else {}


def _loops(actions: list[str]) -> bool:
    """Whether the episode's second half only repeats actions of its first half."""
    half = len(actions) // 2
    return half >= 2 and set(actions[half:]) <= set(actions[:half])


@dataclass
class FailureTable:
    """Failure classes of a set of episodes."""

    episodes: int = 0
    successes: int = 0
    classes: Counter = field(default_factory=Counter)

    def counts(self) -> dict[str, int]:
        """Every class's count (zeros included), in :data:`FAILURE_CLASSES` order."""
        return {name: self.classes.get(name, 0) for name in FAILURE_CLASSES}

    def rows(self) -> list[tuple[str, int, float]]:
        """``(label, count, share of failures)`` per class with at least one episode."""
        failed = max(self.episodes - self.successes, 1)
        return [
            (FAILURE_LABELS[name], count, count / failed)
            for name, count in self.counts().items()
            if count
        ]


def classify_failures(records: Iterable[EpisodeRecord | dict[str, Any]]) -> FailureTable:
    """Classify every failed episode of ``records``."""
    table = FailureTable()
    for record in records:
        table.episodes += 1
        kind = classify_failure(record)
        if kind is None:
            table.successes += 1
        else:
            table.classes[kind] += 1
    return table
