"""The rollout phase of an improvement cycle: whole GRPO groups on training goals, kept or dropped.

A round plays G episodes (same goal and env seed, sampled at the update's temperature) for each of
the next training goals in a seeded order (a cursor walks it across cycles and wraps); groups
without signal are dropped and replaced by fresh goals (``trainers.cycle.sampling.collect_groups``).
Retrieval events are held back, not written, so the caller records them only when the phase
commits. Under several processes each plays its share of a round's goals and all of them gather
every episode, in goal order, so every process makes the same keep / drop decisions.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from memory.types import RetrievalEvent
from skillrl_core.records import EpisodeRecord
from trainers.common.policy_rollouts import PolicyRollouts
from trainers.cycle.config import CycleConfig
from trainers.cycle.processes import Processes
from trainers.cycle.rewards import TurnRewardFn, compute_turn_rewards
from trainers.cycle.sampling import collect_groups


@dataclass
class RolloutPhase:
    """What a cycle's rollout phase played and kept (``cycles/<c>/rollout.json``)."""

    episodes: list[EpisodeRecord]
    """Every episode played, dropped groups too (all of them go to the trajectory store)."""
    kept_groups: list[str]
    """Group ids the update trains on (they carry signal), sorted."""
    dropped_groups: int
    """Groups dropped for carrying no signal (all returns equal)."""
    failed_groups: int
    """Groups dropped because one of their episodes ended on an error."""
    goals_used: list[int]
    """Training goals played, in order."""
    cursor_end: int
    """Position in the training-goal order where the next cycle starts."""
    seconds: float
    """Wall time of the phase."""
    retrievals: list[RetrievalEvent] = field(default_factory=list)
    """Retrieval events held back while rolling out; recorded when the phase commits."""
    retrievals_recorded: bool = False
    """Whether :attr:`retrievals` reached the bank (a resume must not record them twice)."""
    model_seconds: float = 0.0
    """Of :attr:`seconds`, the time spent in the policy's forward passes."""
    forwarded_tokens: int = 0
    """Tokens the policy's forward passes computed (prompt tokens not taken from the prefix
    cache, candidate tokens, generated tokens; 0 for a policy that does not count them)."""

    def kept_episodes(self) -> list[EpisodeRecord]:
        """Return the episodes of the kept groups, in play order."""
        kept = set(self.kept_groups)
        return [e for e in self.episodes if e.group_id in kept]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``rollout.json`` holds)."""
        return {
            "episodes": [e.to_dict() for e in self.episodes],
            "kept_groups": list(self.kept_groups),
            "dropped_groups": self.dropped_groups,
            "failed_groups": self.failed_groups,
            "goals_used": list(self.goals_used),
            "cursor_end": self.cursor_end,
            "seconds": self.seconds,
            "retrievals": [e.to_dict() for e in self.retrievals],
            "retrievals_recorded": self.retrievals_recorded,
            "model_seconds": self.model_seconds,
            "forwarded_tokens": self.forwarded_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RolloutPhase:
        """Rebuild a phase that :meth:`to_dict` wrote.

        Files of older runs lack the last fields: they recorded their retrievals as they played
        and counted no failed groups, no model seconds and no forwarded tokens.
        """
        return cls(
            episodes=[EpisodeRecord.from_dict(e) for e in data["episodes"]],
            kept_groups=[str(g) for g in data["kept_groups"]],
            dropped_groups=int(data["dropped_groups"]),
            failed_groups=int(data.get("failed_groups", 0)),
            goals_used=[int(g) for g in data["goals_used"]],
            cursor_end=int(data["cursor_end"]),
            seconds=float(data["seconds"]),
            retrievals=[RetrievalEvent.from_dict(e) for e in data.get("retrievals", [])],
            retrievals_recorded=bool(data.get("retrievals_recorded", True)),
            model_seconds=float(data.get("model_seconds", 0.0)),
            forwarded_tokens=int(data.get("forwarded_tokens", 0)),
        )


def collect_rollout(
    runner: PolicyRollouts,
    config: CycleConfig,
    processes: Processes,
    rewards: list[TurnRewardFn],
    goal_order: list[int],
    *,
    cycle: int,
    cursor: int,
    temperature: float,
) -> RolloutPhase:
    """Play cycle ``cycle``'s groups from goal position ``cursor``, retrievals held back.

    ``temperature`` is the GRPO update's (``GRPOConfig.temperature``): the update computes
    log-probs at the temperature the turns were sampled at.
    """

    def returns(episodes: list[EpisodeRecord]) -> list[float]:
        return [sum(r) for r in compute_turn_rewards(episodes, rewards)]

    started = time.perf_counter()
    model_before, tokens_before = runner.timings.model_seconds, forwarded_tokens(runner.policy)
    rounds = iter(range(1_000_000))
    held: list[RetrievalEvent] = []

    def rollout(goals: list[int]) -> list[EpisodeRecord]:
        round_index = next(rounds)
        # Each process plays whole groups: its share of the round's goals.
        starts = [
            runner.start(
                config.train_split, goal, seed=config.seed + goal, group_id=f"c{cycle}-g{goal}"
            )
            for goal in processes.share(goals)
            for _ in range(config.group_size)
        ]
        seed = config.seed * 100_003 + cycle * 101 + round_index
        played = (
            runner.run(
                starts,
                temperature=temperature,
                # A seed of its own per process: equal seeds would draw the same noise for
                # different groups (process 0 keeps the single-process seed).
                sampling_seed=seed + 7_919 * processes.index,
                held_retrievals=held,
            )
            if starts
            else []
        )
        if not processes.distributed:
            return played
        # Every process gets every episode, in the order of ``goals``, so all of them make
        # the same keep / drop / top-up decisions and train on the same groups.
        return in_goal_order(len(goals), processes.all_gather(played), config.group_size)

    positions = iter(
        range(cursor, cursor + 10 * config.goals_per_cycle * (config.max_topup_rounds + 1))
    )
    goals = (goal_order[p % len(goal_order)] for p in positions)
    collection = collect_groups(
        rollout,
        goals,
        returns,
        wanted=config.goals_per_cycle,
        dynamic=config.dynamic_sampling,
        max_topup_rounds=config.max_topup_rounds,
    )
    kept = sorted({e.group_id for e in collection.episodes if e.group_id})
    if processes.distributed:  # the main process records every process's retrievals
        held = [event for part in processes.all_gather(held) for event in part]
    return RolloutPhase(
        episodes=collection.rolled_out,
        kept_groups=kept,
        dropped_groups=collection.dropped_groups,
        failed_groups=collection.failed_groups,
        goals_used=collection.goals_used,
        cursor_end=cursor + len(collection.goals_used),
        seconds=time.perf_counter() - started,
        retrievals=held,
        model_seconds=runner.timings.model_seconds - model_before,
        forwarded_tokens=forwarded_tokens(runner.policy) - tokens_before,
    )


def forwarded_tokens(policy: object) -> int:
    """Tokens an in-process policy's forward passes computed so far (0: it does not count)."""
    stats = getattr(policy, "stats", None)
    if stats is None:
        return 0
    return int(stats.prefill_tokens + stats.candidate_tokens + stats.generated_tokens)


def in_goal_order(
    goals: int, parts: list[list[EpisodeRecord]], group_size: int
) -> list[EpisodeRecord]:
    """Reassemble the episodes of ``goals`` goals that processes played as ``Processes.share``.

    Process p played goals p, p + P, ... (P = ``len(parts)``), ``group_size`` episodes each, in
    that order; the result lists each goal's group in the goals' order.
    """
    count = len(parts)
    ordered: list[EpisodeRecord] = []
    for position in range(goals):
        part, slot = parts[position % count], position // count
        ordered.extend(part[slot * group_size : (slot + 1) * group_size])
    return ordered


def training_goal_order(config: CycleConfig, size: int) -> list[int]:
    """Training goals in a seeded order (the cursor walks it; it wraps when exhausted)."""
    order = list(range(size))
    random.Random(f"train-goals-{config.seed}").shuffle(order)
    return order
