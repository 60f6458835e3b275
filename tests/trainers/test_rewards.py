from __future__ import annotations

from dataclasses import dataclass

import pytest
from trainer_helpers import episode

from skillrl_core.errors import ConfigError
from trainers.cycle.rewards import (
    EnvReward,
    InvalidActionPenalty,
    LLMJudgeReward,
    TurnCost,
    compute_turn_rewards,
    default_reward_functions,
    majority_vote,
    parse_vote,
)


def test_env_reward_puts_the_purchase_score_on_the_last_turn():
    bought = episode(["s", "r", "p"], [0.0, 0.0, 0.75], score=0.75)
    assert EnvReward()([bought]) == [[0.0, 0.0, 0.75]]
    # A truncated episode never bought anything: its last turn keeps the env's step reward.
    timed_out = episode(["s", "r"], [0.0, 0.0], terminated=False, score=0.0)
    assert EnvReward()([timed_out]) == [[0.0, 0.0]]


def test_env_reward_keeps_per_turn_rewards_of_a_solved_room():
    # Sokoban pays per turn: -0.1 a move, +1 box onto a target, +10 when solved. The solving
    # turn keeps its 10.9, not the episode's [0, 1] score, so turn-level credit sees the bonus.
    solved = episode(["l", "u", "r"], [-0.1, 0.9, 10.9], score=1.0)
    assert EnvReward()([solved]) == [[-0.1, 0.9, 10.9]]


def test_shaping_penalises_invalid_actions_and_every_turn():
    ep = episode(["s", "r", "p"], [0.0, 0.0, 1.0], valid=[True, False, True], score=1.0)
    rewards = compute_turn_rewards([ep], default_reward_functions(0.1, 0.01))
    assert rewards == [pytest.approx([-0.01, -0.11, 0.99])]


def test_weights_scale_each_function_and_must_match():
    ep = episode(["s", "p"], [0.0, 1.0], score=1.0)
    got = compute_turn_rewards([ep], [EnvReward(), TurnCost(0.5)], weights=[2.0, 1.0])
    assert got == [pytest.approx([-0.5, 1.5])]
    with pytest.raises(ConfigError, match="weights"):
        compute_turn_rewards([ep], [EnvReward()], weights=[1.0, 2.0])
    with pytest.raises(ConfigError, match=">= 0"):
        InvalidActionPenalty(-1.0)


def test_a_user_reward_of_the_wrong_shape_is_rejected():
    @dataclass
    class Broken:
        name: str = "broken"

        def __call__(self, episodes):
            return [[1.0] for _ in episodes]

    with pytest.raises(ConfigError, match="broken"):
        compute_turn_rewards([episode(["a", "b"])], [Broken()])


@dataclass
class FakeGeneration:
    text: str


class ScriptedJudge:
    """Answers from a script, in order; records the conversations it saw."""

    def __init__(self, answers: list[str]):
        self.answers = list(answers)
        self.seen: list[list[dict]] = []

    def generate(self, conversations, sampling):
        self.seen.extend(conversations)
        out = [FakeGeneration(self.answers.pop(0)) for _ in conversations]
        return out


def test_llm_judge_majority_vote_per_turn():
    ep = episode(["search page", "results"], [0.0, 0.0])
    judge_policy = ScriptedJudge(
        # turn 0: YES, yes., NO -> +1; turn 1: no, maybe, NO -> -1
        ["YES", "yes.", "NO", "no", "maybe", "NO it is not"]
    )
    judge = LLMJudgeReward(policy=judge_policy, sampling=None, votes=3, scale=0.2)
    assert judge([ep]) == [pytest.approx([0.2, -0.2])]
    assert judge.unparsable_votes == 1
    assert len(judge_policy.seen) == 6
    assert "buy a red shirt" in judge_policy.seen[0][1]["content"]
    assert "click[0]" in judge_policy.seen[0][1]["content"]


def test_vote_parsing_and_ties():
    assert parse_vote("Yes, it is") is True
    assert parse_vote("NO.") is False
    assert parse_vote("I cannot tell") is None
    assert majority_vote([True, False, None]) == 0
    assert majority_vote([True, True, False]) == 1
