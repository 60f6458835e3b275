from __future__ import annotations

import pytest
from trainer_helpers import episode

from skillrl_core.errors import ConfigError
from trainers.common.episode_metrics import (
    compare_paired,
    pass_at_k,
    pass_at_k_t,
    summarise,
)


def goal_episode(goal: str, turns: int, success: bool):
    ep = episode(["o"] * turns, score=1.0 if success else 0.0)
    ep.goal_id = goal
    return ep


def test_pass_at_k_by_hand():
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)
    assert pass_at_k(4, 0, 4) == 0.0
    assert pass_at_k(4, 3, 2) == 1.0
    with pytest.raises(ConfigError):
        pass_at_k(2, 0, 3)


def test_pass_at_k_t_separates_breadth_from_depth():
    # goal a: one of two samples succeeds, in 6 turns; goal b: both succeed, in 3 and 9 turns.
    episodes = [
        goal_episode("a", 6, True),
        goal_episode("a", 4, False),
        goal_episode("b", 3, True),
        goal_episode("b", 9, True),
    ]
    table = pass_at_k_t(episodes, ks=[1, 2], ts=[3, 6, 15])
    assert table[(1, 3)] == pytest.approx((0.0 + 0.5) / 2)
    assert table[(1, 6)] == pytest.approx((0.5 + 0.5) / 2)
    assert table[(1, 15)] == pytest.approx((0.5 + 1.0) / 2)
    assert table[(2, 3)] == pytest.approx((0.0 + 1.0) / 2)
    assert table[(2, 6)] == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="exceeds"):
        pass_at_k_t(episodes, ks=[3], ts=[15])


def test_summary_counts_invalid_actions_per_turn_and_tokens():
    a = episode(["s", "r", "p"], valid=[True, False, True], score=1.0)
    b = episode(["s"], score=0.0, terminated=False)
    for t in a.turns + b.turns:
        t.prompt_tokens, t.completion_tokens = 100, 10
    s = summarise([a, b])
    assert s.success_rate == 0.5 and s.mean_score == 0.5 and s.mean_turns == 2.0
    assert s.invalid_action_rate == pytest.approx(1 / 4)
    assert s.tokens_per_episode == pytest.approx(440 / 2)
    assert summarise([]).episodes == 0


def test_wilson_interval_by_hand():
    from trainers.common.episode_metrics import wilson_interval

    low, high = wilson_interval(25, 50)
    assert low == pytest.approx(0.3664, abs=1e-4) and high == pytest.approx(0.6336, abs=1e-4)
    low, high = wilson_interval(0, 50)
    assert low == 0.0 and high == pytest.approx(0.0713, abs=1e-4)
    low, high = wilson_interval(50, 50)
    assert high == 1.0 and low == pytest.approx(0.9287, abs=1e-4)
    with pytest.raises(ConfigError):
        wilson_interval(3, 2)


def scored(goal: str, score: float):
    ep = episode(["o"], score=score)
    ep.goal_id = goal
    return ep


def test_paired_comparison_matches_goals_not_positions():
    before = [scored("a", 1.0), scored("b", 0.5), scored("c", 0.0)]
    after = [scored("c", 1.0), scored("a", 0.5), scored("b", 0.5)]  # other order
    result = compare_paired(before, after)
    assert (result.goals, result.successes_before, result.successes_after) == (3, 1, 1)
    assert (result.lost, result.won) == (1, 1)  # a lost, c won
    assert result.score_difference == pytest.approx((-0.5 + 0.0 + 1.0) / 3)
    diffs = [-0.5, 0.0, 1.0]
    sd = (sum((d - 1 / 6) ** 2 for d in diffs) / 2) ** 0.5
    assert result.score_half_width == pytest.approx(1.96 * sd / 3**0.5)


def test_paired_comparison_refuses_different_goals_and_repeats():
    with pytest.raises(ConfigError, match="same goals"):
        compare_paired([scored("a", 1.0)], [scored("b", 1.0)])
    with pytest.raises(ConfigError, match="more than one episode"):
        compare_paired([scored("a", 1.0), scored("a", 0.0)], [scored("a", 1.0)])


def test_arms_compare_goal_by_goal_with_the_exact_mcnemar_test():
    from trainers.common.episode_metrics import summarise
    from trainers.evaluate import EvalResult, GoalOutcome, compare_arms

    def result(arm, wins):
        outcomes = [GoalOutcome(i, f"g{i}", w, float(w), 3) for i, w in enumerate(wins)]
        return EvalResult(skills=arm != "off", greedy=summarise([]), pass_at={}, arm=arm,
                          outcomes=outcomes)  # fmt: skip

    on = result("on", [True] * 10 + [False] * 2)
    placebo = result("placebo", [False] * 10 + [True] * 2)
    [c] = compare_arms([on, placebo])
    assert (c.baseline, c.other, c.baseline_successes, c.other_successes) == (
        "on",
        "placebo",
        10,
        2,
    )
    assert (c.won, c.lost) == (2, 10)
    assert c.p_value == pytest.approx(0.0386, abs=1e-4) and c.resolved
    assert c.score_difference == pytest.approx(-8 / 12)
    shorter = result("off", [True] * 5)
    with pytest.raises(ConfigError, match="different goals"):
        compare_arms([on, shorter])
