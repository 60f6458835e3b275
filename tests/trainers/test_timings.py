"""A runner's timings are the engine's ``RolloutStats``, summed: one record, one name per fact."""

from __future__ import annotations

import dataclasses

from skillrl.rollout import RolloutStats
from trainers.common.policy_rollouts import PolicyRollouts

SHARED = ("model_seconds", "env_seconds", "retrieval_seconds", "wall_seconds")


def test_timings_keep_the_rollout_stats_names_and_sum_them():
    assert {f.name: f.type for f in dataclasses.fields(PolicyRollouts)}["timings"] == "RolloutStats"
    timings = RolloutStats()
    timings.add(RolloutStats(turns=3, agent_calls=2, model_seconds=3.0, env_seconds=0.5,
                             retrieval_seconds=1.5, wall_seconds=6.0))  # fmt: skip
    timings.add(RolloutStats(turns=1, agent_calls=0, model_seconds=1.0, wall_seconds=2.0))
    assert [getattr(timings, name) for name in SHARED] == [4.0, 0.5, 1.5, 8.0]
    assert (timings.turns, timings.agent_calls) == (4, 2)
    assert timings.per_turn() == {"model": 1.0, "env": 0.125, "retrieval": 0.375}
    assert timings.per_batch() == {"model": 2.0, "env": 0.25, "retrieval": 0.75}
    assert RolloutStats().per_turn() == {"model": 0.0, "env": 0.0, "retrieval": 0.0}  # none played
