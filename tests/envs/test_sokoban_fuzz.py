"""Property: no action string raises from ``SokobanEnv.step``; only the four moves do anything."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envs
from envs.sokoban.parse import parse_move

_ENV = envs.make("sokoban", max_turns=10_000)
_PIECES = st.sampled_from(["up", "down", "left", "right", "push", "move", " ", "\n", "\t", "[",
                           "]", "\x00", "\u017f", "\u212a", "UP", "é"])  # fmt: skip
ACTIONS = st.one_of(
    st.text(max_size=300),
    st.lists(_PIECES, max_size=60).map("".join),
    st.builds(lambda pre, move, post: f"{pre}{move}{post}", st.text(max_size=5),
              st.sampled_from(["up", "Down", "push left", "MOVE RIGHT"]), st.text(max_size=5)),
)  # fmt: skip


@settings(
    max_examples=300,
    deadline=timedelta(seconds=1),
    suppress_health_check=[HealthCheck.too_slow],
)
@given(action=ACTIONS, goal=st.integers(0, 149))
def test_no_action_string_raises_and_invalid_ones_are_no_ops(action, goal):
    obs, _ = _ENV.reset(options={"split": "test", "goal_index": goal})
    new_obs, reward, terminated, truncated, info = _ENV.step(action)
    assert isinstance(new_obs, str) and isinstance(info["action_valid"], bool)
    assert info["action_valid"] == (parse_move(action) is not None)
    if not info["action_valid"]:
        assert (new_obs, reward, terminated, truncated) == (obs, 0.0, False, False)
    else:
        assert reward <= 10.9 and not truncated


def test_huge_inputs_are_refused_fast():
    _ENV.reset(options={"split": "test", "goal_index": 0})
    for action in ["up" + " " * 100_000, "push " * 50_000, "[" * 100_000]:
        assert _ENV.step(action)[4]["action_valid"] is False
