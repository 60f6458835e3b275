"""PolicyRollouts hands its decoding settings to the agent it plays with."""

from __future__ import annotations

import pytest

from trainers.common.policy_rollouts import PolicyRollouts


@pytest.mark.parametrize("length_normalize", [True, False])
def test_the_greedy_rank_reaches_the_agent(length_normalize):
    runner = PolicyRollouts(object(), constrained=True, length_normalize=length_normalize)
    agent = runner.make_agent(0.0)
    assert agent.config.length_normalize is length_normalize
    assert agent.config.sampling_scores == runner.sampling_scores
