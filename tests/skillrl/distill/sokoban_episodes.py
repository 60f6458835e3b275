"""Sokoban episodes for the distiller tests, recorded by playing ``envs.make("sokoban")``."""

from __future__ import annotations

from typing import Any

import envs
from skillrl_core.records import EpisodeRecord, TurnRecord

# A target on the top wall keeps that wall alive; the corner to its left is dead.
CORNER_ROOM = "\n".join(["######", "#__O_#", "#_X__#", "#_P__#", "#____#", "######"])
INTO_THE_CORNER = ["up", "right", "up", "left", "down", "down"]
"""Push the box up against the top wall, walk round it, push it left into the corner."""
SOLUTION = ["up", "left", "up", "right"]


def play(actions: list[str], options: dict[str, Any] | None = None) -> EpisodeRecord:
    """Play ``actions`` and record the episode as the rollout engine does."""
    env = envs.make("sokoban", max_turns=len(actions))
    observation, info = env.reset(options=options or {"room": CORNER_ROOM})
    record = EpisodeRecord(
        env_id="sokoban",
        goal_id=info["goal_id"],
        instruction=info["instruction"],
        category=info["category"],
        split="train",
        agent="scripted",
    )
    for index, action in enumerate(actions):
        available = list(info["available_actions"])
        after, reward, terminated, truncated, info = env.step(action)
        record.turns.append(
            TurnRecord(
                turn=index,
                observation=observation,
                available_actions=available,
                action=action,
                action_valid=bool(info["action_valid"]),
                reward=reward,
                terminated=terminated,
                truncated=truncated,
            )
        )
        observation = after
        if terminated or truncated:
            break
    record.success = bool(info["success"])
    record.score = float(reward) if terminated else 0.0  # as the rollout engine scores it
    record.reward_breakdown = info.get("reward_breakdown")
    return record
