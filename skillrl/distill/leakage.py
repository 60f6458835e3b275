"""Reject entries that leak episode specifics into the bank.

A bank entry must transfer to other goals, so it may not carry what only one episode knew:
product ids (Amazon ASINs such as ``B09ABC1234``), literal prices, long verbatim spans of the
episode's instruction, the purchased product's title, or episode/goal ids. Option values named by
the goal (``large``, ``navy blue``) are allowed: a precise note needs them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memory.types import EntryDraft
from skillrl_core.records import EpisodeRecord

# ASINs are 10 characters starting with B0; WebShop lowercases them in actions (click[b09...]).
_ASIN = re.compile(r"\bb0[0-9a-z]{8}\b", re.IGNORECASE)
# "$12", "$ 12.50", "12.99 dollars", "12 usd", a bare "24.99": a literal amount of money. A
# decimal followed by a unit ("2.65 ounce", "25.3 fl oz") is a size, not a price.
_UNIT = (
    r"(?:ounces?|oz|fl|inch(?:es)?|in|cm|mm|m|lbs?|pounds?|kg|g|ml|l|liters?|feet|ft|count|pack|x)"
)
_PRICE = re.compile(
    rf"\$\s?\d|\b\d+(?:[.,]\d+)?\s?(?:dollars?|usd|bucks)\b|\b\d+\.\d{{2}}\b(?!\s?{_UNIT}\b)",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9]+")

SPAN_WORDS = 7
"""A verbatim run of this many instruction words counts as copying the episode."""


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _has_span(haystack: list[str], needle: list[str], size: int) -> bool:
    if len(needle) < size:
        return False
    joined = " " + " ".join(haystack) + " "
    return any(
        " " + " ".join(needle[i : i + size]) + " " in joined for i in range(len(needle) - size + 1)
    )


def find_leaks(text: str, episodes: Iterable[EpisodeRecord] = ()) -> list[str]:
    """Return why ``text`` leaks episode specifics (empty when it is clean)."""
    reasons: list[str] = []
    if match := _ASIN.search(text):
        reasons.append(f"contains a product id ({match.group(0)})")
    if match := _PRICE.search(text):
        reasons.append(f"contains a literal price ({match.group(0).strip()})")
    words = _words(text)
    lowered = text.lower()
    for episode in episodes:
        if _has_span(words, _words(episode.instruction), SPAN_WORDS):
            reasons.append(f"copies {SPAN_WORDS}+ words of episode {episode.episode_id}'s task")
        purchased = (episode.reward_breakdown or {}).get("purchased") or {}
        title_words = _words(str(purchased.get("title", "")))
        if len(title_words) >= 4 and _has_span(words, title_words, min(5, len(title_words))):
            reasons.append("names the purchased product's title")
        for ident in (episode.episode_id, episode.goal_id):
            if ident and len(ident) >= 6 and ident.lower() in lowered:
                reasons.append(f"contains the id {ident}")
    return list(dict.fromkeys(reasons))


def draft_leaks(draft: EntryDraft, episodes: Iterable[EpisodeRecord] = ()) -> list[str]:
    """Return why ``draft`` leaks specifics of ``episodes`` (all text fields are checked)."""
    text = "\n".join(
        [
            draft.title,
            draft.principle,
            draft.when_to_apply,
            draft.failure_point,
            draft.flawed_action,
            draft.correction,
        ]
    )
    return find_leaks(text, list(episodes))
