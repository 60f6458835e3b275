"""``--goals N`` / ``--goals FIRST-LAST``: read from outside text, so every text is either a range
inside the split or a ConfigError naming the text and the split's size."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skillrl_core.errors import ConfigError
from skillrl_core.goal_range import GoalRange, parse_goal_range


def test_a_number_is_the_first_n_goals_and_a_range_includes_both_ends():
    assert parse_goal_range("20", 500, "test") == GoalRange(0, 19)
    assert parse_goal_range("250-349", 500, "test") == GoalRange(250, 349)
    assert parse_goal_range(" 7 - 7 ", 500, "test") == GoalRange(7, 7)
    assert parse_goal_range("250-349", 500, "test").count == 100
    assert list(GoalRange(3, 5).indices()) == [3, 4, 5]
    assert parse_goal_range("499-499", 500, "test").count == 1


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("5-3", "FIRST (5) is after LAST (3)"),
        ("a-b", "is not N"),
        ("-1", "is not N"),
        ("0", "names no goal"),
        ("", "is not N"),
        ("1.5", "is not N"),
        ("3-", "is not N"),
        ("٣", "is not N"),  # an Arabic-Indic digit: int() would read it, the option does not
        ("400-600", "reaches past"),
        ("501", "reaches past"),
    ],
)
def test_bad_text_is_refused_naming_the_text_and_the_split_size(text, why):
    with pytest.raises(ConfigError) as caught:
        parse_goal_range(text, 500, "test")
    message = str(caught.value)
    assert why in message and repr(text) in message
    assert "split 'test' has 500 goals" in message
    assert message.startswith("--goals ")


def test_the_option_name_is_the_callers():
    with pytest.raises(ConfigError, match=r"^--eval-goals '9-1'"):
        parse_goal_range("9-1", 10, "test", option="--eval-goals")


def test_a_goal_range_refuses_to_be_built_backwards_or_negative():
    with pytest.raises(ConfigError):
        GoalRange(5, 3)
    with pytest.raises(ConfigError):
        GoalRange(-1, 3)
    with pytest.raises(ConfigError):
        GoalRange.first_n(0)


@given(text=st.text(max_size=30), size=st.integers(0, 2000))
def test_any_text_is_a_range_inside_the_split_or_a_config_error(text, size):
    try:
        goals = parse_goal_range(text, size, "train")
    except ConfigError as error:
        assert repr(text) in str(error) and f"has {size} goals" in str(error)
        return
    assert 0 <= goals.first <= goals.last < size
    assert goals.count == len(goals.indices())


@given(first=st.integers(0, 10**6), length=st.integers(1, 10**6), extra=st.integers(0, 10**6))
def test_a_range_written_out_reads_back_as_itself(first, length, extra):
    goals = GoalRange(first, first + length - 1)
    size = goals.last + 1 + extra
    assert parse_goal_range(str(goals), size, "eval") == goals
    assert parse_goal_range(str(length), size, "eval") == GoalRange.first_n(length)


@given(first=st.integers(0, 10**4), last=st.integers(0, 10**4), size=st.integers(1, 10**4))
def test_first_last_is_accepted_exactly_when_ordered_and_inside(first, last, size):
    ok = first <= last < size
    try:
        goals = parse_goal_range(f"{first}-{last}", size, "test")
    except ConfigError:
        assert not ok
    else:
        assert ok and goals == GoalRange(first, last)
