"""Property: no action string raises from ``WebShopEnv.step``, on any page, and each is fast.

Invalid text is a no-op (reward 0, ``action_valid`` False, page unchanged); valid text moves on.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envs
from envs.webshop.pages import ITEM, RESULTS, SEARCH

_ENV = envs.make("webshop")
# The page an action is tried on, and the actions that lead there from a reset.
_PATHS = {
    SEARCH: [],
    RESULTS: ["search[cotton t-shirt size s]"],
    ITEM: ["search[cotton t-shirt size s]", None],  # None: the first product on the page
}

_PIECES = st.sampled_from(["[", "]", "search", "click", "<think>", "\x00", " ", "\n", "s", "é"])
ACTIONS = st.one_of(
    st.text(max_size=300),
    st.lists(_PIECES, max_size=200).map("".join),
    st.builds(
        lambda verb, body, n: f"{verb}{'[' * n}{body}{']' * (n // 2)}",
        st.sampled_from(["search", "click", "", "Click", " search "]),
        st.text(max_size=80),
        st.integers(0, 50_000),
    ),
    st.builds(lambda body: f"search[{body}]", st.text(max_size=200)),
    st.builds(lambda body: f"click[{body}]", st.text(max_size=200)),
)


def _at(page: str):
    _ENV.reset(options={"split": "test", "goal_index": 0})
    for action in _PATHS[page]:
        if action is None:
            action = next(a for a in _ENV.available_actions() if a.startswith("click[b0"))
        _ENV.step(action)
    assert _ENV.session.page == page
    return _ENV


@pytest.mark.parametrize("page", [SEARCH, RESULTS, ITEM])
@settings(
    max_examples=60,
    deadline=timedelta(seconds=2),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(action=ACTIONS)
def test_no_action_string_raises_on_any_page(page, action):
    env = _at(page)
    before = env.observation()
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str) and isinstance(info["action_valid"], bool)
    if not info["action_valid"]:
        assert reward == 0.0 and not terminated and obs == before


@pytest.mark.parametrize(
    "action",
    [
        "search[t-shirt size s]",
        "search[s]",
        "search[is a the]",  # only stop words
        "search[\x00\x00]",
        "search[" + "[" * 40_000 + "]",
        "click" + "[" * 40_000,
        "search[" + "ſ" * 1000 + "]",  # long s: folds differently under lower()/casefold()
    ],
)
def test_hard_search_page_inputs_are_handled(action):
    env = _at(SEARCH)
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward == 0.0 and not terminated
    assert info["page"] in (SEARCH, RESULTS)


def test_a_one_letter_size_is_a_valid_search():
    env = _at(SEARCH)
    _, _, _, _, info = env.step("search[t-shirt size s]")
    assert info["action_valid"] and info["page"] == RESULTS
