"""How the rollout engine writes down what happened: a turn's record, an episode's end.

A :class:`TurnRecord` keeps what the agent saw (observation, admissible actions, the retrieved
entries its prompt kept and those the prompt budget left out) and did (model output, action,
the token ids and log-probs that produced it), and what the environment answered (reward, end
flags, its JSON-able ``info``). An episode ends either the environment's way (its adapter judges
success and a score in [0, 1]) or by an error that was not the agent's doing (nothing is
scored).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from envs.adapter import EpisodeRules
from memory.types import RetrievedSkills
from skillrl.agents.base import AgentDecision, AgentState
from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord, TurnRecord

logger = logging.getLogger(__name__)

# Kept out of each turn's info: they are on the turn or the episode already. The per-turn
# reward_breakdown stays (Sokoban explains every move's reward; the distiller reads it).
_INFO_LEFT_OUT = ("available_actions", "instruction", "goal", "category")


def turn_record(
    state: AgentState,
    decision: AgentDecision,
    skills: RetrievedSkills | None,
    reward: float,
    terminated: bool,
    truncated: bool,
    info: dict[str, Any],
) -> TurnRecord:
    """Return the record of one played turn: what the agent saw and decided, what the env did."""
    if decision.skill_ids is not None:
        retrieved_ids = list(decision.skill_ids)
    else:
        retrieved_ids = skills.ids if skills is not None else []
    kept = set(retrieved_ids)
    left_out_ids = [i for i in skills.ids if i not in kept] if skills is not None else []
    extra = {k: v for k, v in info.items() if k not in _INFO_LEFT_OUT and _jsonable(v)}
    extra["parse_ok"] = decision.parse_ok
    return TurnRecord(
        turn=state.turn,
        observation=state.observation,
        available_actions=list(state.available_actions),
        action=decision.action,
        action_valid=bool(info.get("action_valid", True)) and decision.parse_ok,
        reward=float(reward),
        terminated=bool(terminated),
        truncated=bool(truncated),
        model_output=decision.model_output,
        retrieved_ids=retrieved_ids,
        left_out_ids=left_out_ids,
        prompt_tokens=decision.prompt_tokens,
        completion_tokens=decision.completion_tokens,
        prompt_token_ids=decision.prompt_token_ids,
        completion_token_ids=decision.completion_token_ids,
        completion_logprobs=decision.completion_logprobs,
        token_counts=dict(decision.token_counts),
        candidate_scores=decision.candidate_scores,
        action_substituted=decision.action_substituted,
        info=extra,
    )


def fail_episode(record: EpisodeRecord, error: BaseException, slot: int) -> None:
    """End ``record`` early because of ``error`` (not the agent's doing: nothing is scored)."""
    record.error = describe_error(error)
    logger.warning("episode %d failed and was ended: %s", slot, record.error, exc_info=True)
    if record.turns:
        record.turns[-1].truncated = True
    record.success, record.score, record.reward_breakdown = False, 0.0, None


def describe_error(error: BaseException) -> str:
    """Return ``error`` as one short line for :attr:`EpisodeRecord.error`."""
    return f"{type(error).__name__}: {error}"[:500]


def finish_episode(
    record: EpisodeRecord,
    info: dict[str, Any],
    reward: float,
    terminated: bool,
    adapter: EpisodeRules,
) -> None:
    """Score and judge the episode the environment's way (the score is in [0, 1])."""
    record.success = adapter.episode_success(info)
    breakdown = info.get("reward_breakdown")
    record.reward_breakdown = breakdown if isinstance(breakdown, dict) else None
    score = float(adapter.episode_score(float(reward), bool(terminated), info))
    if not 0.0 <= score <= 1.0:  # the contract says [0, 1]; a broken adapter must not skew means
        raise ConfigError(f"episode score ({score}) of {record.env_id!r} must be in [0, 1]")
    record.score = score


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
