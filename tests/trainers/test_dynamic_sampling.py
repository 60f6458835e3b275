from __future__ import annotations

from trainer_helpers import episode

from trainers.cycle.sampling import collect_groups, signal_groups


def make_rollout(outcomes: dict[int, list[float]]):
    """Each goal's group returns the given per-episode scores."""
    calls: list[list[int]] = []

    def rollout(goals: list[int]):
        calls.append(list(goals))
        out = []
        for goal in goals:
            for score in outcomes[goal]:
                out.append(episode(["s"], [score], group=f"goal{goal}", score=score))
        return out

    return rollout, calls


def returns(episodes):
    return [e.score for e in episodes]


def test_signal_groups():
    eps = [
        episode(["s"], group="a", score=1.0),
        episode(["s"], group="a", score=0.0),
        episode(["s"], group="b", score=0.5),
        episode(["s"], group="b", score=0.5),
    ]
    assert signal_groups(eps, returns(eps)) == {"a": True, "b": False}


def test_zero_signal_groups_are_dropped_and_topped_up_from_further_goals():
    outcomes = {0: [0, 0], 1: [1, 0], 2: [1, 1], 3: [0, 0], 4: [0.5, 0.2], 5: [1, 0]}
    rollout, calls = make_rollout(outcomes)
    got = collect_groups(rollout, iter(range(6)), returns, wanted=3, max_topup_rounds=3)
    assert calls == [[0, 1, 2], [3, 4], [5]]
    assert got.kept_groups == 3 and got.dropped_groups == 3 and got.rounds == 3
    assert {e.group_id for e in got.episodes} == {"goal1", "goal4", "goal5"}
    assert len(got.rolled_out) == 12


def test_rounds_and_goals_are_bounded():
    rollout, calls = make_rollout({i: [0, 0] for i in range(10)})
    got = collect_groups(rollout, iter(range(10)), returns, wanted=2, max_topup_rounds=1)
    assert calls == [[0, 1], [2, 3]] and got.kept_groups == 0 and got.dropped_groups == 4
    rollout, calls = make_rollout({0: [0, 0]})
    got = collect_groups(rollout, iter([0]), returns, wanted=2)
    assert calls == [[0]] and got.rounds == 1


def test_without_dynamic_sampling_every_group_is_kept():
    rollout, calls = make_rollout({0: [0, 0], 1: [1, 0]})
    got = collect_groups(rollout, iter(range(2)), returns, wanted=2, dynamic=False)
    assert got.kept_groups == 2 and got.dropped_groups == 0 and len(got.episodes) == 4


def test_a_group_with_a_failed_episode_is_left_out_of_the_update_and_topped_up():
    # Goal 1's group has signal, but one of its episodes ended on an error (the rollout engine
    # records it and goes on): its return is not a real outcome, so the group must not train.
    outcomes = {0: [1, 0], 1: [1, 0], 2: [1, 0]}
    rollout, _ = make_rollout(outcomes)

    def rollout_with_failure(goals):
        episodes = rollout(goals)
        for e in episodes:
            if e.group_id == "goal1" and e.score == 0:
                e.error = "RuntimeError: the environment crashed"
        return episodes

    for dynamic in (True, False):
        got = collect_groups(
            rollout_with_failure, iter(range(3)), returns, wanted=2, dynamic=dynamic
        )
        assert {e.group_id for e in got.episodes} == ({"goal0", "goal2"} if dynamic else {"goal0"})
        assert got.failed_groups == 1
        assert got.dropped_groups == 0
        assert len(got.rolled_out) == (6 if dynamic else 4)
