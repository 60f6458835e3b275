"""``Timings`` sums the engine's ``RolloutStats`` under the same names, one fact one name."""

from __future__ import annotations

import dataclasses

from skillrl.rollout import RolloutStats
from trainers.policy_rollouts import Timings

SHARED = ("model_seconds", "env_seconds", "retrieval_seconds", "wall_seconds")


def test_timings_keep_the_rollout_stats_names_and_sum_them():
    assert set(SHARED) <= {f.name for f in dataclasses.fields(RolloutStats)}
    timings = Timings()
    timings.add(RolloutStats(turns=3, agent_calls=2, model_seconds=3.0, env_seconds=0.5,
                             retrieval_seconds=1.5, wall_seconds=6.0))  # fmt: skip
    timings.add(RolloutStats(turns=1, agent_calls=0, model_seconds=1.0, wall_seconds=2.0))
    assert [getattr(timings, name) for name in SHARED] == [4.0, 0.5, 1.5, 8.0]
    assert timings.per_turn() == {"model": 1.0, "env": 0.125, "retrieval": 0.375}
    assert timings.per_batch() == {"model": 2.0, "env": 0.25, "retrieval": 0.75}
    assert Timings().per_turn() == {"model": 0.0, "env": 0.0, "retrieval": 0.0}  # none played
