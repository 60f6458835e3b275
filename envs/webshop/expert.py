"""A scripted WebShop expert that plays honestly: it sees what an agent sees, plus the goal.

Strategy: search the instruction without its option and price clauses; on a results page, open
the untried product whose title names the most goal attributes and whose listed price fits the
bound (else go to the next page); on the item page, go back if the price is over the bound or a
wanted option is not offered, read the Features page once when the title misses an attribute,
click each wanted option, then buy. Near the turn limit it buys what it has.

When the turn's info carries ``case_titles`` (the cases retrieved into the prompt: what solved
a near-identical request in a training episode), it opens the product a case names when the
results list it, before weighing titles: a policy labelled this way learns to act on what a case
says, and falls back to reading titles when no case's product is listed.

It can act from any state, not only from its own path: :meth:`WebShopExpert.decide` reads the
page, and :meth:`WebShopExpert.observe` remembers the action actually taken (by the expert or by
a learner whose states it labels, as in DAgger). On a product page that a learner opened although
the results offered one naming more goal attributes, it goes back to the results.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz import fuzz, utils

_MONEY = re.compile(r"\$(\d+(?:\.\d+)?)")
_ASIN = re.compile(r"^[a-z0-9]{10}$")
_CASE_PRODUCT = re.compile(r"click\[([a-z0-9]{10})\]")
_RICH_MARK = re.compile(r"\[(?:clicked )?button_?\]")
_ITEM_NAVIGATION = frozenset(
    {
        "click[< prev]",
        "click[back to search]",
        "click[buy now]",
        "click[description]",
        "click[reviews]",
        "click[attributes]",
    }
)


def split_observation(observation: str) -> list[str]:
    """Return the visible texts of an observation in ``text`` or ``text_rich`` mode."""
    if " [SEP] " in observation or "\n" not in observation:
        return [part.strip() for part in observation.split(" [SEP] ") if part.strip()]
    texts = [_RICH_MARK.sub("", line).strip() for line in observation.splitlines()]
    return [t for t in texts if t and not t.startswith("You have clicked ")]


def split_request(instruction: str) -> tuple[str, str]:
    """Return an instruction's request and its ``with name: value, and name: value`` clause.

    The price clause is dropped; without an option clause the second part is empty.
    """
    text = instruction.split(", and price lower than ")[0]
    colon = text.find(": ")
    if colon < 0:
        return text, ""
    start = text.rfind(" with ", 0, colon)
    if start < 0:
        return text, text
    return text[:start], text[start + len(" with ") :]


def search_query(instruction: str) -> str:
    """Return the instruction without its ``with name: value`` and price clauses."""
    return split_request(instruction)[0].strip()


def requested_options(instruction: str) -> tuple[str, ...]:
    """Return the option values an instruction names, lowercased, in its order.

    The clause that :func:`search_query` leaves out:
    ``"... with color: navy blue, and size: medium, and price lower than 50.00 dollars"`` ->
    ``("navy blue", "medium")``. An instruction without one names none.
    """
    values = []
    for part in split_request(instruction)[1].split(", and "):
        _, sep, value = part.partition(": ")
        value = " ".join(value.split()).lower()
        if sep and value:
            values.append(value)
    return tuple(dict.fromkeys(values))


def case_products(info: dict[str, Any]) -> tuple[str, ...]:
    """Return the products the retrieved cases name (``info["case_titles"]``), best case first."""
    found: list[str] = []
    for title in info.get("case_titles") or ():
        found += [m.lower() for m in _CASE_PRODUCT.findall(str(title).lower())]
    return tuple(dict.fromkeys(found))


def listed_price(text: str) -> float | None:
    """Return the lowest dollar amount in a price tag (``$10.99 to $12.99`` -> 10.99)."""
    amounts = [float(m) for m in _MONEY.findall(text)]
    return min(amounts) if amounts else None


@dataclass
class _Episode:
    instruction: str = ""
    attributes: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    price_upper: float = float("inf")
    tried: set[str] = field(default_factory=set)
    current: str | None = None
    chosen: set[str] = field(default_factory=set)
    features: str = ""
    read_features: bool = False
    turn: int = 0
    page: str = ""
    """Page of the state last passed to ``decide`` (what ``observe`` interprets actions on)."""
    best_left: int = -1
    """Title hits of the best untried product of the last results page (-1: none seen)."""
    case_products: tuple[str, ...] = ()
    """Products the retrieved cases name (the last results page's)."""


class WebShopExpert:
    """Plays one WebShop episode at a time from observations, available actions and the goal."""

    def __init__(self, max_turns: int = 15) -> None:
        self.max_turns = max_turns
        self.episode = _Episode()

    def reset(self, reset_info: dict[str, Any]) -> None:
        """Start an episode; ``reset_info`` is the env's reset info (``goal`` is required)."""
        goal = reset_info.get("goal") or {}
        self.episode = _Episode(
            instruction=str(reset_info.get("instruction", goal.get("instruction", ""))),
            attributes=[a.lower() for a in goal.get("attributes", [])],
            options=[o.lower() for o in goal.get("options", [])],
            price_upper=float(goal.get("price_upper", float("inf"))),
        )

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """Choose the next action and remember it as taken."""
        action = self.decide(observation, info)
        self.observe(action)
        return action

    def decide(self, observation: str, info: dict[str, Any]) -> str:
        """Choose the next action from this state, whoever took the earlier actions."""
        actions = list(info.get("available_actions", []))
        turn = info.get("turn")
        # The env's turn counter when it is known, so labelling a learner's states keeps the
        # turn-limit logic right even though the expert did not take those turns.
        self.episode.turn = int(turn) + 1 if turn is not None else self.episode.turn + 1
        page = info.get("page") or self._guess_page(actions)
        self.episode.page = page
        texts = split_observation(observation)
        if page == "search":
            return f"search[{search_query(self.episode.instruction)}]"
        if page == "results":
            return self._on_results(texts, actions, case_products(info))
        if page == "item":
            return self._on_item(texts, actions)
        if page == "item_sub":
            self.episode.features = " ".join(texts).lower()
            return "click[< prev]"
        return actions[0] if actions else "click[back to search]"

    def observe(self, action: str) -> None:
        """Remember ``action`` as taken from the state last passed to :meth:`decide`."""
        ep = self.episode
        if not action.startswith("click[") or not action.endswith("]"):
            return
        value = action[len("click[") : -1]
        if ep.page == "results" and _ASIN.match(value):
            ep.current = value
            ep.tried.add(value)
        elif ep.page == "item":
            if action == "click[features]":
                ep.read_features = True
            elif action not in _ITEM_NAVIGATION:
                ep.chosen.add(action)

    @staticmethod
    def _guess_page(actions: list[str]) -> str:
        if any(a.startswith("search[") for a in actions):
            return "search"
        if "click[buy now]" in actions:
            return "item"
        if "click[next >]" in actions:
            return "results"
        return "item_sub"

    def _title_hits(self, title: str) -> int:
        lower = title.lower()
        return sum(a in lower for a in self.episode.attributes)

    def _on_results(self, texts: list[str], actions: list[str], cases: tuple[str, ...]) -> str:
        ep = self.episode
        ep.current, ep.chosen, ep.features, ep.read_features = None, set(), "", False
        ep.case_products = cases
        for asin in cases:
            if f"click[{asin}]" in actions and asin not in ep.tried:
                ep.best_left = -1
                return f"click[{asin}]"
        best: tuple[int, int, str] | None = None
        for i, text in enumerate(texts):
            asin = text.lower()
            if not _ASIN.match(asin) or f"click[{asin}]" not in actions or asin in ep.tried:
                continue
            if i + 2 >= len(texts):
                continue
            price = listed_price(texts[i + 2])
            affordable = price is None or price <= ep.price_upper
            score = (self._title_hits(texts[i + 1]), int(affordable), asin)
            if best is None or score[:2] > best[:2]:
                best = score
        ep.best_left = -1 if best is None else best[0]
        if best is not None:
            return f"click[{best[2]}]"
        return "click[next >]" if "click[next >]" in actions else "click[back to search]"

    def _option_action(self, wanted: str, actions: list[str]) -> str | None:
        exact = f"click[{wanted}]"
        if exact in actions:
            return exact
        for action in actions:
            value = action[len("click[") : -1]
            # Much stricter than the reward's token-set ratio: "x-large" must not pass for "large".
            score = fuzz.token_sort_ratio(value, wanted, processor=utils.default_process)
            if score > 95:
                return action
        return None

    def _on_item(self, texts: list[str], actions: list[str]) -> str:
        ep = self.episode
        price_text = next((t for t in texts if t.startswith("Price:")), "")
        price = listed_price(price_text)
        if price is not None and price > ep.price_upper:
            return "click[< prev]"
        pending = []
        for wanted in ep.options:
            action = self._option_action(wanted, actions)
            if action is None:
                return "click[< prev]"  # the product does not come in a wanted option
            if action not in ep.chosen:
                pending.append(action)
        last_turns = ep.turn >= self.max_turns - 1
        at = texts.index(price_text) if price_text in texts else 0
        title = texts[at - 1] if at > 0 else ""
        from_case = ep.current is not None and ep.current in ep.case_products
        if self._title_hits(title) < ep.best_left and not last_turns and not from_case:
            return "click[< prev]"  # opened (by a learner) although a better match was listed
        if pending and not last_turns:
            return pending[0]
        missing = self._title_hits(title) < len(ep.attributes)
        if missing and not ep.read_features and not last_turns and ep.turn < self.max_turns - 4:
            return "click[features]"
        return "click[buy now]"
