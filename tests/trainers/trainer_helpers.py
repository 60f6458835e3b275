"""Builders of small episode records for the trainer tests."""

from __future__ import annotations

import torch

from skillrl_core.records import EpisodeRecord, TurnRecord
from trainers.update.batching import TurnSample, collate
from trainers.update.microbatch_loss import compute_logprobs


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


def group_episodes(
    model, prompt, good, bad, old_shift: float = 0.0, pad: int = 0
) -> list[EpisodeRecord]:
    """Two episodes of one group from the same prompt: one bought (good), one did not."""
    episodes = []
    for completion, score in ((good, 1.0), (bad, 0.0)):
        batch = collate([TurnSample(prompt, completion, None, 0.0)], pad)
        with torch.no_grad():
            old = (compute_logprobs(model, batch)[0] + old_shift).tolist()
        episodes.append(one_turn_episode(prompt, completion, old, score))
    return episodes


def one_turn_episode(
    prompt: list[int], completion: list[int], old: list[float] | None, score: float
) -> EpisodeRecord:
    """An episode of one generated turn (group "grp") that ends with ``score``."""
    turn = TurnRecord(
        turn=0,
        observation="search page",
        available_actions=[],
        action="x",
        action_valid=True,
        reward=score,
        terminated=True,
        prompt_token_ids=prompt,
        completion_token_ids=completion,
        completion_logprobs=old,
    )
    return EpisodeRecord(
        env_id="webshop",
        goal_id="g",
        instruction="i",
        category="c",
        turns=[turn],
        success=score == 1.0,
        score=score,
        group_id="grp",
    )


def sample_episodes(samples: list[TurnSample]) -> tuple[list[EpisodeRecord], list[list[float]]]:
    """One one-turn episode per sample, and the samples' advantages (what train_step takes)."""
    episodes = [
        one_turn_episode(s.prompt_ids, s.completion_ids, s.old_logprobs, 0.0) for s in samples
    ]
    return episodes, [[s.advantage] for s in samples]
