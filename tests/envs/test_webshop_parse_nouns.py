"""The pure action parser and the rule-based title-noun tagger that stands in for spaCy."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.webshop.nouns import is_noun, title_nouns, tokenize
from envs.webshop.parse import Command, split_command


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("search[Red Shoes]", Command("search", "red shoes")),
        ("click[B09ABC1234]", Command("click", "b09abc1234")),
        ("  click[buy now]\n", Command("click", "buy now")),
        ("click[x] and more text", Command("click", "x")),
        ("click[a[b]]", Command("click[a", "b]")),  # upstream's greedy pattern
        ("search[]", Command("search[]", None)),
        ("buy now", Command("buy now", None)),
    ],
)
def test_parse_action(action, expected):
    assert split_command(action) == expected


def test_parse_action_returns_a_new_frozen_object():
    first, second = split_command("click[a]"), split_command("click[a]")
    assert first == second and first is not second
    with pytest.raises(AttributeError):
        first.arg = "b"  # type: ignore[misc]


def test_tokenize_splits_like_spacy_on_titles():
    assert tokenize("Clip-in Hair (18 inch), 3-Ounce") == [
        "Clip",
        "-",
        "in",
        "Hair",
        "(",
        "18",
        "inch",
        ")",
        ",",
        "3",
        "-",
        "Ounce",
    ]


def test_title_nouns():
    # spaCy tags every word here but "by" as PROPN.
    assert title_nouns("Bright Citrus Deodorant by Earth Mama") == [
        "bright",
        "citrus",
        "deodorant",
        "earth",
        "mama",
    ]
    # Lowercase adjectives, numbers and function words are dropped; lowercase nouns are kept.
    assert title_nouns("organic green tea with 20 bags for the office") == ["tea", "bags", "office"]
    assert title_nouns("waterproof portable speaker, 3oz") == ["speaker"]


@pytest.mark.parametrize("word", ["Shirt", "sofa", "Acme", "ounce"])
def test_nouns(word):
    assert is_noun(word)


@pytest.mark.parametrize("word", ["the", "with", "12", "3oz", "-", "comfortable", "washable", "x"])
def test_not_nouns(word):
    assert not is_noun(word)


# Upstream's pattern, kept here only as the reference the linear-time parser must agree with.
_UPSTREAM = re.compile(r"(.+)\[(.+)\]")


def _upstream(action: str) -> Command:
    text = action.strip()
    match = _UPSTREAM.match(text)
    if match is None:
        return Command(text, None)
    return Command(match.group(1), match.group(2).lower())


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab[] \n\tK", max_size=14))
def test_parse_action_accepts_what_upstreams_pattern_accepts(action):
    assert split_command(action) == _upstream(action)


@pytest.mark.parametrize(
    "action",
    ["click" + "[" * 40_000, "click[" + "]" * 40_000, "[]" * 20_000 + "x", "a[" * 20_000],
)
def test_parse_action_is_linear_on_bracket_runs(action):
    started = time.perf_counter()
    split_command(action)
    assert time.perf_counter() - started < 0.1  # upstream's pattern takes seconds to minutes


@settings(max_examples=300, deadline=timedelta(milliseconds=200))
@given(st.text() | st.binary().map(lambda b: b.decode("latin-1")))
def test_parse_action_takes_any_text(action):
    parsed = split_command(action)
    assert parsed.arg is None or (parsed.arg == parsed.arg.lower() and "\n" not in parsed.arg)
    assert parsed == _upstream(action) or len(action) > 2_000
