from __future__ import annotations

import math

import pytest
from trainer_helpers import episode

from skillrl_core.errors import ConfigError
from trainers.update.advantages import (
    combine_advantages,
    compute_advantages,
    discounted_returns,
    episode_advantages,
    group_normalise,
    step_advantages,
)


def test_discounted_returns_by_hand():
    # G2 = 3, G1 = 2 + 0.5 * 3, G0 = 1 + 0.5 * 3.5
    assert discounted_returns([1.0, 2.0, 3.0], 0.5) == pytest.approx([2.75, 3.5, 3.0])
    assert discounted_returns([], 0.9) == []


def test_episode_advantages_normalise_within_each_group():
    returns = [1.0, 0.0, 0.0, 5.0, 7.0]
    groups = ["a", "a", "a", "b", "b"]
    # group a: mean 1/3, population std sqrt(2/9); group b: mean 6, std 1
    root2 = math.sqrt(2)
    expected = [root2, -root2 / 2, -root2 / 2, -1.0, 1.0]
    assert episode_advantages(returns, groups) == pytest.approx(expected)


def test_identical_rewards_and_singleton_groups_get_zero():
    assert episode_advantages([0.5, 0.5, 0.5], ["g", "g", "g"]) == [0.0, 0.0, 0.0]
    assert episode_advantages([3.0, 1.0], ["x", "y"]) == [0.0, 0.0]


def test_scale_none_only_centres():
    assert group_normalise([1.0, 0.0, 0.0], ["g"] * 3, scale="none") == pytest.approx(
        [2 / 3, -1 / 3, -1 / 3]
    )
    with pytest.raises(ConfigError, match="scale"):
        group_normalise([1.0], ["g"], scale="batch")


def test_step_groups_join_identical_observations_only_within_a_group():
    # ep1 sees A then B with rewards 0, 1; ep2 sees A then C with rewards 0, 0; gamma 0.5.
    # Step group A holds returns 0.5 (ep1) and 0 (ep2) -> +1 / -1; B and C are singletons -> 0.
    returns = [discounted_returns([0, 1], 0.5), discounted_returns([0, 0], 0.5)]
    step = step_advantages(returns, [["A", "B"], ["A", "C"]], ["g", "g"])
    assert step == [pytest.approx([1.0, 0.0]), pytest.approx([-1.0, 0.0])]
    # The same observation in another group is another step group: both singletons.
    apart = step_advantages(returns, [["A", "B"], ["A", "C"]], ["g", "h"])
    assert apart == [[0.0, 0.0], [0.0, 0.0]]


def test_combined_is_episode_plus_weighted_step():
    assert combine_advantages([1.0, -1.0], [[1.0, 0.0], [-1.0, 0.0]], 0.5) == [
        [1.5, 1.0],
        [-1.5, -1.0],
    ]


def test_compute_advantages_end_to_end_and_w_zero_is_plain_grpo():
    episodes = [episode(["A", "B"], group="g"), episode(["A", "C"], group="g")]
    rewards = [[0.0, 1.0], [0.0, 0.0]]
    turn = compute_advantages(episodes, rewards, gamma=0.5, step_weight=0.5)
    assert turn.returns == [1.0, 0.0]
    assert turn.episode == pytest.approx([1.0, -1.0])
    assert turn.advantages == [pytest.approx([1.5, 1.0]), pytest.approx([-1.5, -1.0])]
    assert turn.step_group_sizes == {1: 2, 2: 1}
    plain = compute_advantages(episodes, rewards, gamma=0.5, step_weight=0.0)
    assert plain.advantages == [pytest.approx([1.0, 1.0]), pytest.approx([-1.0, -1.0])]


def test_turn_cost_makes_the_shorter_success_better():
    short = episode(["s", "p", "buy"], group="g")
    long = episode(["s", "p", "x", "y", "z", "buy"], group="g")
    rewards = [[-0.01, -0.01, 1 - 0.01], [-0.01] * 5 + [1 - 0.01]]
    turn = compute_advantages([short, long], rewards, gamma=1.0, step_weight=1.0)
    assert turn.episode[0] > 0 > turn.episode[1]


def test_mismatched_lengths_raise():
    with pytest.raises(ConfigError, match="differ"):
        compute_advantages([episode(["A"])], [], gamma=1.0, step_weight=1.0)


def test_rft_gives_one_to_every_turn_of_a_success_and_nothing_else():
    won = episode(["A", "B"], group="g", score=1.0)
    lost = episode(["A", "C", "D"], group="g")
    alone = episode(["E"], group=None, score=1.0)  # no group: RFT needs none
    rewards = [[0.0, 1.0], [0.0, 0.0, 0.0], [1.0]]
    turn = compute_advantages(
        [won, lost, alone], rewards, gamma=0.5, step_weight=1.0, estimator="rft"
    )
    assert turn.advantages == [[1.0, 1.0], [0.0, 0.0, 0.0], [1.0]]
    assert turn.episode == [1.0, 0.0, 1.0]


def test_rft_weight_adds_the_success_term_to_grpo():
    won = episode(["A"], group="g", score=1.0)
    lost = episode(["B"], group="g")
    rewards = [[1.0], [0.0]]
    plain = compute_advantages([won, lost], rewards, gamma=1.0, step_weight=0.0)
    mixed = compute_advantages([won, lost], rewards, gamma=1.0, step_weight=0.0, rft_weight=0.5)
    assert plain.advantages == [[1.0], [-1.0]]
    assert mixed.advantages == [[1.5], [-1.0]]


def test_an_unknown_estimator_is_refused():
    with pytest.raises(ConfigError, match="estimator"):
        compute_advantages([episode(["A"])], [[0.0]], gamma=1.0, step_weight=1.0, estimator="x")
