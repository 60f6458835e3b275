from __future__ import annotations

import pytest

from skillrl.parsing import is_search_page, parse_action

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
        ("I do not know", RESULTS, "no search[...] or click[...]"),
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
