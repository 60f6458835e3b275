"""What the distiller knows about WebShop (:class:`WebShopDistillAdapter`).

Actions are ``search[...]`` and ``click[...]``; a click is navigation (``back to search``,
``next >``, ``description``...), a product (an ASIN), ``buy now``, or otherwise an option value
(``large``, ``navy blue``). A failed purchase is explained from its :class:`WebShopPurchase`:
each cause of lost reward (wrong product type, a missed option, the price bound, missed
attributes) becomes one note; an episode that never bought is explained from the trajectory
(invalid actions, loops, endless browsing). Leaks: ASINs, literal prices, the purchased title.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from envs.distill_adapter import (
    LeakPattern,
    Lesson,
    PlainDistillAdapter,
    SuccessLesson,
    has_span,
    most_repeated,
    words,
)
from envs.webshop.categories import CATEGORIES
from envs.webshop.expert import search_query
from envs.webshop.purchase import WebShopPurchase
from skillrl_core.records import EpisodeRecord

_ACTION = re.compile(r"^\s*([a-z_ ]+?)\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)
# ASINs are 10 characters starting with B0; WebShop lowercases them in actions (click[b09...]).
_ASIN = re.compile(r"^b0[0-9a-z]{8}$", re.IGNORECASE)
ASIN_IN_TEXT = re.compile(r"\bb0[0-9a-z]{8}\b", re.IGNORECASE)
# "$12", "$ 12.50", "12.99 dollars", "12 usd", a bare "24.99": a literal amount of money. A
# decimal followed by a unit ("2.65 ounce", "25.3 fl oz") is a size, not a price.
_UNIT = (
    r"(?:ounces?|oz|fl|inch(?:es)?|in|cm|mm|m|lbs?|pounds?|kg|g|ml|l|liters?|feet|ft|count|pack|x)"
)
PRICE_IN_TEXT = re.compile(
    rf"\$\s?\d|\b\d+(?:[.,]\d+)?\s?(?:dollars?|usd|bucks)\b|\b\d+\.\d{{2}}\b(?!\s?{_UNIT}\b)",
    re.IGNORECASE,
)
PAGING = frozenset({"next >", "< prev"})
DETAILS = frozenset({"description", "features", "reviews", "attributes"})
NAVIGATION = PAGING | DETAILS | {"back to search"}
BUY = "buy now"
BUY_ACTION = f"click[{BUY}]"
FAULTS: tuple[str, ...] = ("wrong_option", "skip_option", "hasty_buy")
"""Probe mistakes (see :meth:`WebShopDistillAdapter.spoil`)."""

_SIZE = re.compile(
    r"^(?:x{0,3}[sl]|m|xs|xxl|\dxl|small|medium|large|(?:x+|extra)[- ]?(?:large|small)|"
    r"one size|petite|plus|\d+(?:\.\d+)?\s?(?:w|l|t|in|inch|inches|cm|mm|m|ft|feet|oz|fl oz|"
    r"ounces?|ml|liters?|lbs?|pounds?|pack|count|pieces?|\")?"
    r"(?:\s?x\s?\d+(?:\.\d+)?\s?\w*)?|.*\bsize\b.*)$"
)
_COLORS = frozenset(
    "black white grey gray silver gold red pink purple violet blue navy teal green olive "
    "yellow orange brown beige tan khaki cream ivory burgundy maroon coral multi multicolor "
    "clear transparent natural charcoal rose mint".split()
)


def split_action(action: str) -> tuple[str, str]:
    """Return ``(verb, argument)`` of ``verb[argument]`` (lowercased); ``(action, "")`` if bare."""
    match = _ACTION.match(action)
    if not match:
        return action.strip().lower(), ""
    return match.group(1).strip().lower(), match.group(2).strip().lower()


def option_kind(value: str) -> str:
    """Guess what option a value belongs to: ``size``, ``color`` or ``option``."""
    value = value.strip().lower()
    if _SIZE.match(value):
        return "size"
    if _COLORS.intersection(re.findall(r"[a-z]+", value)):
        return "color"
    return "option"


def is_product(action: str) -> bool:
    """Whether ``action`` opens a product (clicks an ASIN)."""
    verb, target = split_action(action)
    return verb == "click" and bool(_ASIN.match(target))


def is_option(action: str) -> bool:
    """Whether ``action`` clicks an option value on a product page."""
    verb, target = split_action(action)
    return verb == "click" and target not in NAVIGATION and target != BUY and not is_product(action)


@dataclass
class ShoppingFacts:
    """What a successful WebShop episode's steps show, without its specifics."""

    searches: int = 0
    pages_turned: int = 0
    option_clicks: list[str] = field(default_factory=list)
    """Option values clicked on product pages, in order."""


def shopping_facts(episode: EpisodeRecord) -> ShoppingFacts:
    """Count the searches, page turns and option clicks of ``episode`` (valid actions only)."""
    facts = ShoppingFacts()
    for turn in episode.turns:
        verb, target = split_action(turn.action)
        if not turn.action_valid:
            continue
        if verb == "search":
            facts.searches += 1
        elif target in PAGING:
            facts.pages_turned += 1
        elif is_option(turn.action):
            facts.option_clicks.append(target)
    return facts


def product_options(episode: EpisodeRecord, opened: int) -> tuple[str, ...]:
    """Return the option values the page listed that turn ``opened`` of ``episode`` opened.

    The next turn's admissible clicks are that product page's: its options, besides navigation
    and Buy Now. What a product comes in is on its page only, never on the results page that
    lists it, so a case that keeps it tells a later request for other options which product to
    open. Empty when the episode ended on the click.
    """
    if opened + 1 >= len(episode.turns):
        return ()
    actions = episode.turns[opened + 1].available_actions
    values = (split_action(a)[1].lower() for a in actions if is_option(a))
    return tuple(dict.fromkeys(values))


def _pair_missed_options(purchase: WebShopPurchase) -> list[tuple[str, str, str | None]]:
    """Return ``(option name, wanted value, chosen value or None)`` for each missed option."""
    matched = {v.lower() for v in purchase.options_matched}
    chosen = {k.lower(): v.lower() for k, v in purchase.options_chosen.items()}
    wrong = {name: value for name, value in chosen.items() if value not in matched}
    pairs = []
    for wanted in (v.lower() for v in purchase.options_missed):
        kind = option_kind(wanted)
        name = kind if kind in wrong else (next(iter(wrong)) if len(wrong) == 1 else kind)
        pairs.append((name, wanted, wrong.pop(name, None)))
    return pairs


def option_lessons(purchase: WebShopPurchase) -> list[Lesson]:
    """One note per requested option value the purchase did not have."""
    lessons = []
    for name, wanted, chosen in _pair_missed_options(purchase):
        # The values go in failure_point only: the other fields state the lesson in words that
        # recur across episodes, so notes about other values merge into one entry in the bank.
        if chosen is None:
            failure = f"bought without selecting the requested {name} ({wanted})"
            flawed = f"{BUY_ACTION} before choosing a {name}"
        else:
            failure = f"chose {name} {chosen} while the goal asked for {wanted}"
            flawed = f"clicked a {name} other than the one the instruction names"
        here = "" if name == "option" else f" (here the {name})"
        lessons.append(
            Lesson(
                title=f"Select the requested {name} before Buy Now",
                principle=(
                    f"Select every option named in the instruction{here} on the product page, "
                    "matching its value exactly, before clicking Buy Now."
                ),
                when_to_apply=f"On a product page when the instruction names a {name}.",
                failure_point=failure,
                flawed_action=flawed,
                correction=f"click the {name} the instruction names (here {wanted}), then buy now",
            )
        )
    return lessons


PRICE_LESSON = Lesson(
    title="Respect the price bound",
    principle=(
        "Treat the instruction's price limit as a hard constraint: compare each result's "
        "listed price with the bound and open or buy only items below it."
    ),
    when_to_apply="When the instruction says 'price lower than' a bound.",
    failure_point="bought an item priced above the instruction's price bound",
    flawed_action=f"{BUY_ACTION} on an item over the price bound",
    correction="go back to the results and open a matching item priced under the bound",
)
TYPE_LESSON = Lesson(
    title="Buy the requested product type",
    principle=(
        "Open only results whose title names the product type the instruction asks for; "
        "if none does, refine the search with the product type instead of settling."
    ),
    when_to_apply="On a results page, before opening a product.",
    failure_point="bought a product of a different type than the instruction asked for",
    flawed_action="opened and bought a result whose title names another product type",
    correction="search again with the requested product type and open a result that names it",
)


def attribute_lesson(missed: tuple[str, ...]) -> Lesson:
    """Note that the purchase lacked attributes the instruction asked for."""
    named = ", ".join(f"'{a}'" for a in missed[:3])
    return Lesson(
        title="Check every requested attribute before buying",
        principle=(
            "Put the key attributes of the instruction in the search query and check that the "
            "title or description of the product mentions each of them before Buy Now."
        ),
        when_to_apply="When the instruction lists attributes (materials, features, fit).",
        failure_point=f"the purchased item lacked requested attribute(s) {named}",
        flawed_action=f"{BUY_ACTION} without checking the attributes",
        correction=f"search with {named} and open a product whose title or description has them",
    )


_FINISH = f"open the best matching result, select the requested options, {BUY_ACTION}"


def _sentence(steps: list[str]) -> str:
    text = "; ".join(steps)
    return text[0].upper() + text[1:] + "."


class WebShopDistillAdapter(PlainDistillAdapter):
    """WebShop's purchase breakdown, shopping lessons, leaks and probe faults."""

    env_id = "webshop"
    categories = CATEGORIES
    leak_patterns = (
        LeakPattern(ASIN_IN_TEXT, "a product id"),
        LeakPattern(PRICE_IN_TEXT, "a literal price"),
    )
    specifics_rule = (
        "never write product ids (like B09...), prices or other amounts of money, or the "
        "product's title. Naming an option value the task asked for (a size, a color) is fine "
        "when it makes a note precise."
    )
    faults = FAULTS

    def outcome(self, episode: EpisodeRecord) -> WebShopPurchase | None:
        """Return the purchase, or None when nothing was bought."""
        data = episode.reward_breakdown
        return WebShopPurchase.from_dict(data) if data else None

    def explain(self, episode: EpisodeRecord) -> str:
        """Return the judge's findings, or that nothing was bought."""
        purchase = self.outcome(episode)
        if purchase is None:
            return "- nothing was bought (the episode ran out of turns or stopped)"
        return purchase.explain()

    def summarise_actions(self, episode: EpisodeRecord) -> str:
        """List the actions, product ids hidden (the teacher must not copy them)."""
        lines = []
        for turn in episode.turns:
            step = "open a product from the results" if is_product(turn.action) else turn.action
            lines.append(f"{turn.turn}. {step}" + ("" if turn.action_valid else " (invalid)"))
        return "\n".join(lines)

    def describe_action(self, action: str) -> str:
        """Name an action without its free text (queries and product ids are episode specific)."""
        verb, argument = split_action(action)
        if verb == "search":
            return "the same search"
        if _ASIN.match(argument):
            return "opening the same product"
        return action

    def case_lesson(self, episode: EpisodeRecord) -> Lesson | None:
        """Return which product solved ``episode``'s request, if it was solved by a purchase.

        WebShop's goals recur across splits (most test goals ask for a product that some
        training goal asks for, with other options), and the results page shows ten look-alike
        titles: which one satisfied a near-identical request is what no page says. The request
        is the instruction without its option and price clauses (what differs between goals of
        one product); the prompt line names the product as the click that opens it.
        """
        if not episode.success:
            return None
        opened = [i for i, t in enumerate(episode.turns) if t.action_valid and is_product(t.action)]
        if not opened:
            return None
        product = split_action(episode.turns[opened[-1]].action)[1]
        searches = [
            split_action(t.action)[1]
            for t in episode.turns
            if t.action_valid and split_action(t.action)[0] == "search"
        ]
        options = shopping_facts(episode).option_clicks
        steps = [f"search[{searches[-1]}]"] if searches else []
        steps += [f"click[{product}]", *(f"click[{o}]" for o in options), "click[buy now]"]
        return Lesson(
            title=f"A request like this was solved by click[{product}]",
            principle="Solved by: " + ", ".join(steps),
            when_to_apply=search_query(episode.instruction),
            offers=product_options(episode, opened[-1]),
        )

    def failure_lessons(self, episode: EpisodeRecord) -> list[Lesson]:
        """Return each cause of lost reward, most decisive first; else why nothing was bought."""
        purchase = self.outcome(episode)
        if purchase is None:
            return [self._unfinished(episode)] if episode.turns else []
        lessons = [] if purchase.type_matched else [TYPE_LESSON]
        lessons += option_lessons(purchase)
        if not purchase.price_ok:
            lessons.append(PRICE_LESSON)
        if purchase.attributes_missed:
            lessons.append(attribute_lesson(purchase.attributes_missed))
        return lessons

    def _unfinished(self, episode: EpisodeRecord) -> Lesson:
        turns = len(episode.turns)
        invalid = self.invalid_actions_lesson(episode)
        if invalid is not None:
            return dataclasses.replace(invalid, correction=_FINISH)
        action, times = most_repeated(episode)
        if times >= 3:
            flawed = f"repeated {self.describe_action(action)} {times} times"
            title = "Break loops and commit within the turn budget"
            principle = (
                "Never repeat an action that did not change the page; after two result pages "
                "without a match, refine the query, and once a matching product is open, buy it."
            )
        else:
            flawed = "kept browsing without opening and buying a matching product"
            title = "Commit to a matching product within the turn budget"
            principle = (
                "Budget the turns: search, open the best matching result, set the requested "
                "options and buy; do not keep browsing once a product matches."
            )
        return Lesson(
            title=title,
            principle=principle,
            when_to_apply="When more than half of the turn budget is used and nothing is bought.",
            failure_point=f"used all {turns} turns without completing the task",
            flawed_action=flawed,
            correction=_FINISH,
        )

    def success_lesson(self, episode: EpisodeRecord) -> SuccessLesson:
        """Return the decisive steps of a purchase as a pattern (search, open, options, buy)."""
        facts = shopping_facts(episode)
        purchase = self.outcome(episode)
        names = [name.lower() for name in purchase.options_chosen] if purchase else []
        names = sorted(set(names or [option_kind(v) for v in facts.option_clicks]))
        steps = ["search with the product type and the key attributes of the instruction"]
        if facts.searches > 1:
            steps.append("refine the query when the first results miss the product type")
        steps.append("open a result whose title names the requested type and attributes")
        if facts.pages_turned:
            steps.append("turn to the next results page only when the first has no match")
        if names:
            steps.append(f"click the requested value of each option ({', '.join(names)})")
        if purchase is not None and (purchase.price_upper or purchase.paid is not None):
            steps.append("check that the listed price is under the instruction's bound")
        steps.append("click Buy Now")
        what = f" and set {' and '.join(names)}" if names else ""
        label = self.category_label(episode.category)
        lesson = Lesson(
            title=f"{label}: find the match{what}, then buy",
            principle=_sentence(steps),
            when_to_apply=f"Shopping for a {label.lower()} item"
            + (f" whose instruction names a {' or '.join(names)}." if names else "."),
        )
        return SuccessLesson(lesson, "options" if names else "plain")

    def general_lesson(self, pattern: str) -> Lesson:
        """Return the shopping pattern stated for any task that ends in one irreversible action."""
        if pattern == "options":
            return Lesson(
                title="Make every choice the task names before the final action",
                principle=(
                    "Before an irreversible final action (buying, submitting), make every "
                    "explicit choice the task names (each requested option, size or color) and "
                    "confirm the item matches the requested type and limits."
                ),
                when_to_apply="Any multi-step task that ends in one irreversible action.",
            )
        return Lesson(
            title="Find the best match, verify it, then commit",
            principle=(
                "Search with the object type plus the key constraints of the task, open the "
                "first candidate that names them, verify its details against every constraint, "
                "then commit without further browsing."
            ),
            when_to_apply="Any multi-step task that ends in one irreversible action.",
        )

    def episode_leaks(self, text: str, episode: EpisodeRecord) -> list[str]:
        """Return a reason when ``text`` names the purchased title (this episode's alone)."""
        purchase = self.outcome(episode)
        title_words = words(purchase.purchased_title) if purchase else []
        if len(title_words) >= 4 and has_span(words(text), title_words, min(5, len(title_words))):
            return ["names the purchased product's title"]
        return []

    def spoil(self, fault: str, action: str, available: list[str], spoiled: bool) -> str | None:
        """Replace the expert's first option click (or product click) with a typical mistake.

        ``wrong_option`` clicks a neighbouring value instead; ``skip_option`` buys at once;
        ``hasty_buy`` opens another result than the expert's and, once spoiled, buys it at once.
        """
        if spoiled:
            if fault == "hasty_buy" and BUY_ACTION in available:
                return BUY_ACTION
            return None
        spoils = is_product if fault == "hasty_buy" else is_option
        return faulty_action(action, available, fault) if spoils(action) else None


def faulty_action(action: str, available: list[str], fault: str) -> str | None:
    """Return the mistaken replacement of the expert's ``action`` (None if impossible)."""
    if fault == "hasty_buy":
        others = [a for a in available if is_product(a) and a != action]
        return others[-1] if others else None
    if fault == "skip_option":
        return BUY_ACTION if BUY_ACTION in available else None
    options = [a for a in available if is_option(a)]
    if action not in options or len(options) < 2:
        return None
    position = options.index(action)
    # The neighbour in page order is most often another value of the same option.
    return options[position + 1] if position + 1 < len(options) else options[position - 1]
