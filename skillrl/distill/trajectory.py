"""Render a trajectory as text, the way a raw-trajectory memory would store it.

What a trajectory's actions mean belongs to its environment (``envs.distill_adapter_for(env)``
``.summarise_actions``); this module only lays the turns out.
"""

from __future__ import annotations

from skillrl_core.records import EpisodeRecord


def render_trajectory(episode: EpisodeRecord, *, max_observation_chars: int | None = None) -> str:
    """Render an episode as a raw-trajectory memory would store it (task, observations, actions)."""
    lines = [f"Task: {episode.instruction}"]
    for turn in episode.turns:
        observation = turn.observation
        if max_observation_chars is not None and len(observation) > max_observation_chars:
            observation = observation[:max_observation_chars] + " ..."
        validity = "" if turn.action_valid else " (invalid)"
        lines.append(f"Observation {turn.turn}: {observation}")
        lines.append(f"Action {turn.turn}: {turn.action}{validity}")
    outcome = "success" if episode.success else "failure"
    lines.append(f"Outcome: {outcome}, score {episode.score:g}")
    return "\n".join(lines)
