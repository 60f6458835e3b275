"""Counterfactual notes from failed episodes, made precise by the reward breakdown.

Each cause of lost reward that the breakdown names (wrong product type, a missed option, the price
bound, missed attributes) becomes one ``mistake`` draft: where it went wrong, the flawed action,
what to do instead and the principle. Episodes that never bought anything are explained from the
trajectory's structure (loops, invalid actions, endless paging).
"""

from __future__ import annotations

import re
from typing import Any

from memory.types import EntryDraft
from skillrl.distill.trajectory import TrajectoryFacts, trajectory_facts
from skillrl_core.records import EpisodeRecord

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


def option_kind(value: str) -> str:
    """Guess what option a value belongs to: ``size``, ``color`` or ``option``."""
    value = value.strip().lower()
    if _SIZE.match(value):
        return "size"
    if _COLORS.intersection(re.findall(r"[a-z]+", value)):
        return "color"
    return "option"


def _note(episode: EpisodeRecord, title: str, **fields: str) -> EntryDraft:
    return EntryDraft(
        kind="mistake",
        title=title,
        env=episode.env_id,
        category=episode.category,
        source="distiller:analytic",
        trajectory_ids=[episode.episode_id],
        reason=f"failed episode (score {episode.score:.1f}) in {episode.category}",
        **fields,
    )


def _pair_missed_options(options: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """Return ``(option name, wanted value, chosen value or None)`` for each missed option."""
    matched = {str(v).lower() for v in options.get("matched", [])}
    chosen = {str(k).lower(): str(v).lower() for k, v in (options.get("chosen") or {}).items()}
    wrong = {name: value for name, value in chosen.items() if value not in matched}
    pairs = []
    for wanted in (str(v).lower() for v in options.get("missed", [])):
        kind = option_kind(wanted)
        name = kind if kind in wrong else (next(iter(wrong)) if len(wrong) == 1 else kind)
        pairs.append((name, wanted, wrong.pop(name, None)))
    return pairs


def option_notes(episode: EpisodeRecord, options: dict[str, Any]) -> list[EntryDraft]:
    """One note per requested option value the purchase did not have."""
    notes = []
    for name, wanted, chosen in _pair_missed_options(options):
        # The values go in failure_point only: the other fields state the lesson in words that
        # recur across episodes, so notes about other values merge into one entry in the bank.
        if chosen is None:
            failure = f"bought without selecting the requested {name} ({wanted})"
            flawed = f"click[buy now] before choosing a {name}"
        else:
            failure = f"chose {name} {chosen} while the goal asked for {wanted}"
            flawed = f"clicked a {name} other than the one the instruction names"
        here = "" if name == "option" else f" (here the {name})"
        notes.append(
            _note(
                episode,
                f"Select the requested {name} before Buy Now",
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
    return notes


def price_note(episode: EpisodeRecord) -> EntryDraft:
    """Note that the purchase cost more than the instruction allowed."""
    return _note(
        episode,
        "Respect the price bound",
        principle=(
            "Treat the instruction's price limit as a hard constraint: compare each result's "
            "listed price with the bound and open or buy only items below it."
        ),
        when_to_apply="When the instruction says 'price lower than' a bound.",
        failure_point="bought an item priced above the instruction's price bound",
        flawed_action="click[buy now] on an item over the price bound",
        correction="go back to the results and open a matching item priced under the bound",
    )


def type_note(episode: EpisodeRecord) -> EntryDraft:
    """Note that the purchase was a different kind of product than the one asked for."""
    return _note(
        episode,
        "Buy the requested product type",
        principle=(
            "Open only results whose title names the product type the instruction asks for; "
            "if none does, refine the search with the product type instead of settling."
        ),
        when_to_apply="On a results page, before opening a product.",
        failure_point="bought a product of a different type than the instruction asked for",
        flawed_action="opened and bought a result whose title names another product type",
        correction="search again with the requested product type and open a result that names it",
    )


def attribute_note(episode: EpisodeRecord, missed: list[str]) -> EntryDraft:
    """Note that the purchase lacked attributes the instruction asked for."""
    named = ", ".join(f"'{a}'" for a in missed[:3])
    return _note(
        episode,
        "Check every requested attribute before buying",
        principle=(
            "Put the key attributes of the instruction in the search query and check that the "
            "title or description of the product mentions each of them before Buy Now."
        ),
        when_to_apply="When the instruction lists attributes (materials, features, fit).",
        failure_point=f"the purchased item lacked requested attribute(s) {named}",
        flawed_action="click[buy now] without checking the attributes",
        correction=f"search with {named} and open a product whose title or description has them",
    )


def unfinished_note(episode: EpisodeRecord, facts: TrajectoryFacts) -> EntryDraft:
    """Note that the episode ended without a purchase (turn limit or giving up)."""
    action, times = facts.most_repeated
    if facts.invalid_actions * 2 >= max(facts.turns, 1):
        flawed = f"{facts.invalid_actions} of {facts.turns} actions were not admissible"
        title = "Use only admissible actions"
        principle = (
            "Copy one action exactly from the list of available actions each turn; "
            "anything else is a wasted turn."
        )
    elif times >= 3:
        flawed = f"repeated {_generic(action)} {times} times"
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
    return _note(
        episode,
        title,
        principle=principle,
        when_to_apply="When more than half of the turn budget is used and nothing is bought.",
        failure_point=f"used all {facts.turns} turns without completing the task",
        flawed_action=flawed,
        correction="open the best matching result, select the requested options, click[buy now]",
    )


def _generic(action: str) -> str:
    """Describe an action without its free text (queries and product ids are episode specific)."""
    verb, argument = action.split("[", 1) if "[" in action else (action, "")
    if verb.strip() == "search":
        return "the same search"
    if re.match(r"b0[0-9a-z]{8}\]?$", argument.strip()):
        return "opening the same product"
    return action


def failure_notes(episode: EpisodeRecord, max_notes: int) -> list[EntryDraft]:
    """Counterfactual notes for one failed episode, most decisive cause first."""
    breakdown = episode.reward_breakdown
    facts = trajectory_facts(episode)
    if not breakdown:
        return [unfinished_note(episode, facts)] if facts.turns else []
    notes: list[EntryDraft] = []
    if float(breakdown.get("r_type", 1.0)) < 1.0:
        notes.append(type_note(episode))
    notes += option_notes(episode, breakdown.get("options") or {})
    if not (breakdown.get("price") or {}).get("ok", True):
        notes.append(price_note(episode))
    missed = list((breakdown.get("attributes") or {}).get("missed") or [])
    if missed:
        notes.append(attribute_note(episode, [str(a) for a in missed]))
    return notes[:max_notes]
