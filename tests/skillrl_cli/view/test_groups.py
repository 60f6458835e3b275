"""Why a group was kept or dropped, as dynamic sampling decided it; advantages never invented."""

from __future__ import annotations

from skillrl_cli.view.groups import cycle_groups, group_reason
from skillrl_core.records import EpisodeRecord, TurnRecord
from trainers.cycle.cycle_rollout import RolloutPhase


def _episode(group: str, error: str = "") -> EpisodeRecord:
    turn = TurnRecord(turn=0, observation="o", available_actions=[], action="a",
                      action_valid=True, reward=0.0)  # fmt: skip
    return EpisodeRecord("webshop", "g", "buy", "c", turns=[turn], group_id=group, error=error)


def test_the_reason_follows_collect_groups():
    ok, failed = [_episode("a")], [_episode("b"), _episode("b", error="Boom")]
    assert group_reason(ok, True, dynamic_sampling=True).startswith("kept: its episodes' returns")
    assert group_reason(ok, True, dynamic_sampling=False).startswith("kept: dynamic sampling was")
    assert group_reason(ok, False, dynamic_sampling=True).startswith("dropped: every episode")
    assert group_reason(failed, False, dynamic_sampling=False) == (
        "dropped: an episode ended on an error (Boom)"
    )


def test_groups_keep_play_order_and_show_no_advantage_without_a_record():
    episodes = [_episode("x"), _episode("y"), _episode("x")]
    phase = RolloutPhase(episodes=episodes, kept_groups=["x"], dropped_groups=1, failed_groups=0,
                         goals_used=[1, 2], cursor_end=2, seconds=0.0)  # fmt: skip
    first, second = cycle_groups(phase, None, dynamic_sampling=True)
    assert (first.group_id, first.kept, len(first.episodes)) == ("x", True, 2)
    assert (second.group_id, second.kept) == ("y", False)
    assert all(e.advantage is None and e.turns[0].advantage is None for e in first.episodes)
    assert first.longest == 1
