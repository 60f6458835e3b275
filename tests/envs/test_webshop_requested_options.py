"""What a WebShop instruction asks its product to come in, read as retrieval reads it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import envs
from envs.webshop.expert import requested_options, search_query


def test_the_option_values_of_a_goal_instruction_in_order():
    instruction = (
        "find me men's dress shirts with long sleeve, cotton spandex with color: Navy Blue, "
        "and size: x-large, and price lower than 50.00 dollars"
    )
    assert requested_options(instruction) == ("navy blue", "x-large")
    assert envs.adapter_for("webshop").wanted_values(instruction) == ("navy blue", "x-large")
    assert requested_options("find me shoe rack with stackable, space saving") == ()
    assert requested_options("i need a lamp, and price lower than 40.00 dollars") == ()
    assert envs.adapter_for("sokoban").wanted_values("push every box onto a target") == ()


WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=8)
PHRASE = st.lists(WORD, min_size=1, max_size=3).map(" ".join)


@given(
    request=PHRASE,
    options=st.dictionaries(WORD, PHRASE, max_size=4),
    price=st.none() | st.integers(1, 999),
)
def test_the_values_a_goal_is_built_with_are_read_back(request, options, price):
    # As envs/webshop/goals.py writes an instruction.
    option_text = ", and ".join(f"{k}: {v}" for k, v in sorted(options.items()))
    instruction = f"i need {request}" + (f" with {option_text}" if option_text else "")
    instruction += f", and price lower than {price:.2f} dollars" if price else ""
    wanted = [options[k].lower() for k in sorted(options)]
    assert requested_options(instruction) == tuple(dict.fromkeys(wanted))
    assert search_query(instruction) == f"i need {request}"


@given(st.text(max_size=200))
def test_any_text_reads_as_clean_values_or_none(text):
    values = requested_options(text)
    assert isinstance(values, tuple)
    assert all(v and v == v.strip().lower() and "  " not in v for v in values)
    assert len(set(values)) == len(values)
