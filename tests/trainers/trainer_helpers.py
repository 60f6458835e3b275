"""Builders of small episode records for the trainer tests."""

from __future__ import annotations

from skillrl.records import EpisodeRecord, TurnRecord


def episode(
    observations: list[str],
    rewards: list[float] | None = None,
    *,
    group: str | None = "g",
    valid: list[bool] | None = None,
    score: float = 0.0,
    terminated: bool = True,
) -> EpisodeRecord:
    rewards = rewards if rewards is not None else [0.0] * len(observations)
    valid = valid if valid is not None else [True] * len(observations)
    turns = [
        TurnRecord(
            turn=i,
            observation=obs,
            available_actions=[],
            action=f"click[{i}]",
            action_valid=valid[i],
            reward=rewards[i],
            terminated=terminated and i == len(observations) - 1,
            truncated=(not terminated) and i == len(observations) - 1,
        )
        for i, obs in enumerate(observations)
    ]
    return EpisodeRecord(
        env_id="webshop",
        goal_id="goal-1",
        instruction="buy a red shirt",
        category="fashion",
        turns=turns,
        success=score == 1.0,
        score=score,
        group_id=group,
    )
