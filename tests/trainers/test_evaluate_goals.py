"""``skillrl eval --goals FIRST-LAST``: the evaluation plays exactly those goals, each with the seed
it has in any other range."""

from __future__ import annotations

import pytest

from skillrl_core.errors import ConfigError
from skillrl_core.goal_range import GoalRange
from skillrl_core.records import EpisodeRecord, TurnRecord
from trainers.evaluate import EvalConfig, evaluate


class ScriptedRunner:
    """Plays nothing: records the starts it is given; goal index i succeeds when i is even."""

    bank = None

    def __init__(self) -> None:
        self.starts: list[tuple[str, int, int]] = []
        self.timings = None

    def start(self, split: str, goal_index: int, *, seed: int) -> tuple[str, int, int]:
        return (split, goal_index, seed)

    def run(self, starts, temperature, sampling_seed=None):
        self.starts.extend(starts)
        return [self._episode(index) for _, index, _ in starts]

    @staticmethod
    def _episode(index: int) -> EpisodeRecord:
        solved = index % 2 == 0
        turn = TurnRecord(0, "", [], "a", True, float(solved), terminated=True)
        return EpisodeRecord(
            "webshop", f"g{index}", "", "", turns=[turn], success=solved, score=float(solved)
        )


def test_a_range_plays_its_goals_with_the_seeds_they_have_in_any_range():
    runner = ScriptedRunner()
    result = evaluate(runner, EvalConfig(goals=GoalRange(250, 253), seed=7))
    assert runner.starts == [("test", i, 7 + i) for i in (250, 251, 252, 253)]
    assert result.greedy.episodes == 4 and result.greedy.success_rate == 0.5
    assert result.greedy.successes == 2
    low, high = result.greedy.success_interval  # Wilson, 2 of 4
    assert (round(low, 3), round(high, 3)) == (0.150, 0.850)
    assert result.to_dict()["greedy"]["success_interval"] == [low, high]

    first = ScriptedRunner()
    evaluate(first, EvalConfig(goals=GoalRange.first_n(254), seed=7))
    assert first.starts[250:] == runner.starts  # goal 250 plays alike in 0-253 and 250-253


def test_eval_config_takes_a_goal_range_only():
    with pytest.raises(ConfigError, match="must be a GoalRange"):
        EvalConfig(goals=20)
    assert EvalConfig().goals == GoalRange(0, 19)
