"""`skillrl eval`'s figures do not move with how its episodes are batched.

SkillRL's users saw its released checkpoint score 0.77 or 0.52 depending only on the evaluation
batch size. Here the shipped adapter plays the same test goals, greedy and constrained, in the
number format evaluation uses (``EVAL_DTYPE``), at batch sizes 1, 5 and 16 (one goal a batch,
uneven batches, all goals in one), and every episode takes the same actions. Sixteen goals keep
it to about 4 minutes on a 100 GFLOP/s machine (the batch-of-one pass is the costly one).
"""

from __future__ import annotations

import pytest

from skillrl.policies import PolicyConfig, load_policy
from skillrl.policies.model_settings import shipped_adapter
from trainers.common.policy_rollouts import PolicyRollouts
from trainers.evaluate import EVAL_DTYPE

GOALS = 16


@pytest.mark.slow
def test_the_same_goals_take_the_same_actions_at_batch_sizes_1_5_and_16():
    adapter = shipped_adapter("webshop")
    assert adapter is not None
    policy = load_policy(PolicyConfig(model=str(adapter), dtype=EVAL_DTYPE, threads=2))
    actions = {}
    for parallel in (1, 5, GOALS):
        runner = PolicyRollouts(
            policy,
            max_turns=5,
            max_new_tokens=24,
            constrained=True,
            env_config={"observation_mode": "text_rich"},
            max_parallel=parallel,
            count_retrievals=False,
        )
        starts = [runner.start("test", i, seed=i) for i in range(GOALS)]  # as evaluate() does
        episodes = runner.run(starts, temperature=0.0)
        actions[parallel] = [[t.action for t in e.turns] for e in episodes]
    assert len(actions[1]) == GOALS
    assert actions[5] == actions[1]
    assert actions[GOALS] == actions[1]
