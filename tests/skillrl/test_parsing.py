from __future__ import annotations

import time
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.sokoban.agent_adapter import SokobanAgentAdapter
from envs.webshop.agent_adapter import WebShopAgentAdapter, is_search_page
from skillrl.parsing import parse_action as parse_with

WEBSHOP = WebShopAgentAdapter()
SOKOBAN = SokobanAgentAdapter()
MOVES = ["up", "down", "left", "right"]


def parse_action(text, available):
    """WebShop's grammar inside the generic envelope (the cases below are shop pages)."""
    return parse_with(text, available, WEBSHOP)


RESULTS = ["click[back to search]", "click[next >]", "click[b09abc1234]", "click[large]"]
SEARCH = ["search[<query>]"]


@pytest.mark.parametrize(
    ("text", "available", "action"),
    [
        (
            "<think>need shoes</think><action>search[red shoes]</action>",
            SEARCH,
            "search[red shoes]",
        ),
        ("<think>x</think><action>click[B09ABC1234]</action>", RESULTS, "click[b09abc1234]"),
        ("I will click[ large ] now", RESULTS, "click[large]"),  # bare, padded, no tags
        ("<action>search[  cheap   tea ", SEARCH, "search[cheap tea]"),  # unclosed everything
        ("<action>Click[Next >]</action>", RESULTS, "click[next >]"),
        (
            "<think>a</think>\n<action>\nsearch[tea]\n</action><action>click[large]</action>",
            SEARCH,
            "search[tea]",
        ),
    ],
)
def test_lenient_forms_parse_to_the_admissible_action(text, available, action):
    parsed = parse_action(text, available)
    assert parsed.ok, parsed.error
    assert parsed.action == action


def test_think_text_is_extracted():
    assert parse_action("<think> compare prices </think>click[large]", RESULTS).think == (
        "compare prices"
    )
    assert parse_action("click[large]", RESULTS).think == ""


@pytest.mark.parametrize(
    ("text", "available", "error"),
    [
        ("I do not know", RESULTS, "no action of this environment's grammar"),
        ("<action>click[small]</action>", RESULTS, "not among the admissible"),
        ("<action>search[shoes]</action>", RESULTS, "search is not available"),
        ("<action>search[]</action>", SEARCH, "empty search query"),
        ("<action>search[<query>]</action>", SEARCH, "empty search query"),
        ("<action>click[buy now]</action>", SEARCH, "not among the admissible"),
    ],
)
def test_unusable_output_is_invalid_not_an_exception(text, available, error):
    parsed = parse_action(text, available)
    assert not parsed.ok
    assert error in parsed.error


def test_is_search_page():
    assert is_search_page(SEARCH)
    assert not is_search_page(RESULTS)
    assert not is_search_page([])


@pytest.mark.parametrize(
    ("text", "action", "think"),
    [
        (
            "<think>do not click[buy now] yet</think> click[back to search]",
            "click[back to search]",
            "do not click[buy now] yet",
        ),
        (
            "<THINK>click[buy now]<action>click[back to search]</action>",  # <action> ends it
            "click[back to search]",
            "click[buy now]",
        ),
        (
            "maybe click[buy now]</think><action>click[back to search]</action>",  # opened by the
            "click[back to search]",  # chat template
            "maybe click[buy now]",
        ),
        (
            "<think>a</think> x <think>click[buy now]</think>click[b09abc1234]",
            "click[b09abc1234]",
            "a\nclick[buy now]",
        ),
    ],
)
def test_actions_inside_think_are_thoughts_not_actions(text, action, think):
    parsed = parse_action(text, ["click[back to search]", "click[buy now]", "click[b09abc1234]"])
    assert parsed.ok and parsed.action == action and parsed.think == think


def test_an_unclosed_think_holds_no_action():
    parsed = parse_action("<think>do not click[buy now] yet", ["click[buy now]"])
    assert not parsed.ok and "no action of this environment's grammar" in parsed.error
    assert parsed.think == "do not click[buy now] yet"


@pytest.mark.parametrize(
    ("unit", "count", "tail"),
    [
        ("<think>", 50_000, ""),
        ("</think>", 50_000, ""),
        ("<think><action>", 30_000, ""),
        ("<think></think>", 30_000, "click["),
        ("<action>", 50_000, ""),
        ("click[", 50_000, ""),
        ("search ", 50_000, "["),
        ("[", 200_000, ""),
    ],
)
def test_parsing_is_linear_on_adversarial_output(unit, count, tail):
    # Relative, not a wall-clock bound (machines differ): sixteen times the text may take about
    # sixteen times as long, where a quadratic parse would take 256 times; the bound (64) leaves
    # room for a busy machine.
    def seconds(piece: str) -> float:
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            parse_action(piece, RESULTS)
            best = min(best, time.perf_counter() - started)
        return best

    whole, part = unit * count + tail, unit * (count // 16) + tail
    assert seconds(whole) < 64 * max(seconds(part), 1e-4)


_PIECES = st.sampled_from(
    ["<think>", "</think>", "<action>", "</action>", "click[", "search[", "[", "]", "\x00", "é"]
)


@settings(max_examples=300, deadline=timedelta(milliseconds=500))
@given(
    st.one_of(st.text(max_size=400), st.lists(_PIECES | st.text(max_size=5)).map("".join)),
    st.sampled_from(RESULTS),
)
def test_any_text_parses_to_a_result_not_an_exception(text, admissible):
    parsed = parse_action(text, RESULTS)
    assert parsed.ok == (parsed.action in RESULTS)
    assert parsed.ok or parsed.error
    # Whatever was said inside a think block cannot be the action.
    thought = f"{text} {admissible} {text}".replace("<", " ")
    thought_only = parse_action(f"<think>{thought}</think>", RESULTS)
    assert not thought_only.ok


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("<think>the box is left of me</think><action>left</action>", "left"),
        ("<action>Push Up</action>", "up"),
        ("I will move down now", "down"),  # no tags: the reply outside any think
        ("<think>not up</think><action>RIGHT", "right"),  # unclosed action, thought ignored
        ("<action></action> then left", "left"),  # an empty action: read outside it
    ],
)
def test_sokoban_moves_parse_in_the_same_envelope(text, action):
    parsed = parse_with(text, MOVES, SOKOBAN)
    assert parsed.ok, parsed.error
    assert parsed.action == action


@pytest.mark.parametrize(
    ("text", "available", "error"),
    [
        ("<action>jump</action>", MOVES, "no action of this environment's grammar"),
        ("<think>go up</think>", MOVES, "no action of this environment's grammar"),
        ("<action>left</action>", [], "not among the admissible"),  # the episode is over
        ("<action>upward</action>", MOVES, "no action"),  # whole words only
    ],
)
def test_sokoban_unusable_output_is_invalid(text, available, error):
    parsed = parse_with(text, available, SOKOBAN)
    assert not parsed.ok and error in parsed.error


@pytest.mark.parametrize("adapter", [WEBSHOP, SOKOBAN], ids=["webshop", "sokoban"])
@settings(max_examples=200, deadline=timedelta(milliseconds=500))
@given(st.lists(_PIECES | st.sampled_from(MOVES) | st.text(max_size=5)).map("".join))
def test_any_text_is_a_result_for_every_environment(adapter, text):
    available = RESULTS if adapter is WEBSHOP else MOVES
    parsed = parse_with(text, available, adapter)
    assert parsed.ok == (parsed.action in available)
    assert parsed.ok or parsed.error


@settings(max_examples=200, deadline=timedelta(milliseconds=500))
@given(st.lists(_PIECES | st.text(max_size=8)).map("".join), st.booleans())
def test_any_written_query_becomes_one_well_formed_search(written, repair):
    action, repaired = WEBSHOP.free_text_action(written, "buy a red ball", repair)
    assert action.startswith("search[") and action.endswith("]")
    assert "[" not in action[len("search[") : -1] and "]" not in action[len("search[") : -1]
    assert repaired <= repair  # only ever repaired when asked
    if repaired:
        assert action == "search[buy a red ball]"
