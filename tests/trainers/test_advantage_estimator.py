"""A new advantage estimator is one class, and a training run trains with it."""

from __future__ import annotations

import pytest
from test_checkpoint_choice import open_scripted_run
from trainer_helpers import episode

from trainers.cycle.config import CycleConfig
from trainers.update.advantages import (
    AdvantageEstimator,
    GroupRelative,
    RejectionSampling,
    compute_advantages,
    with_episode_part,
)


class ShorterSuccesses:
    """A newcomer's estimator: a success is worth less the more turns it took."""

    name = "shorter"

    def estimate(self, episodes, rewards):
        worth = [1.0 - 0.1 * e.num_turns if e.success else 0.0 for e in episodes]
        return with_episode_part(episodes, rewards, worth)


def test_a_class_of_the_protocol_s_shape_is_an_estimator():
    estimator: AdvantageEstimator = ShorterSuccesses()
    episodes = [episode(["a", "b"], score=1.0), episode(["a", "c", "d"], score=0.0)]
    result = estimator.estimate(episodes, [[0.0, 1.0], [0.0, 0.0, 0.0]])
    assert result.advantages == [[0.8, 0.8], [0.0, 0.0, 0.0]]
    assert result.returns == [1.0, 0.0] and result.step_weight == 0.0


def test_the_named_estimators_are_the_classes_compute_advantages_uses():
    episodes = [episode(["a", "b"], [0.0, 1.0], score=1.0), episode(["a", "c"], score=0.0)]
    rewards = [[0.0, 1.0], [0.0, 0.0]]
    by_name = compute_advantages(episodes, rewards, gamma=0.9, step_weight=0.5, rft_weight=1.0)
    by_class = GroupRelative(step_weight=0.5, rft_weight=1.0, gamma=0.9).estimate(episodes, rewards)
    assert by_name == by_class and by_class.episode == [2.0, -1.0]
    rft = RejectionSampling().estimate(episodes, rewards)
    assert rft.advantages == [[1.0, 1.0], [0.0, 0.0]]
    with pytest.raises(Exception, match="differ in length"):
        with_episode_part(episodes, rewards, [1.0])


@pytest.mark.slow
def test_a_training_run_trains_on_the_advantages_of_the_estimator_it_is_given(tmp_path):
    config = CycleConfig(cycles=1, goals_per_cycle=2, group_size=2, eval_goals=1, max_turns=3,
                         max_new_tokens=16, seed=2, max_topup_rounds=0, dynamic_sampling=False,
                         validation_goals=0)  # fmt: skip
    run, bank = open_scripted_run(tmp_path, config, advantage_estimator=ShorterSuccesses())
    run.run()
    bank.close()
    record = run.files.load_update_record(1)
    rollout = run.files.load_rollout(1)
    played = {e.episode_id: e for e in rollout.kept_episodes()}
    assert record.episodes and record.step_weight == 0.0
    for kept in record.episodes:
        e = played[kept.episode_id]
        worth = 1.0 - 0.1 * e.num_turns if e.success else 0.0
        assert kept.episode_advantage == pytest.approx(worth)
        assert all(t.advantage == pytest.approx(worth) for t in kept.turns)
