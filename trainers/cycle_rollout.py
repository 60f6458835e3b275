"""The rollout phase of an improvement cycle: whole GRPO groups on training goals, kept or dropped.

A round plays G episodes (same goal and env seed, sampled at ``train_temperature``) for each of
the next training goals in a seeded order (a cursor walks it across cycles and wraps); groups
without signal are dropped and replaced by fresh goals (``trainers.sampling.collect_groups``).
Retrieval events are held back, not written, so the caller records them only when the phase
commits. Under several processes each plays its share of a round's goals and all of them gather
every episode, in goal order, so every process makes the same keep / drop decisions.
"""

from __future__ import annotations

import random
import time
from typing import Any

from skillrl_core.records import EpisodeRecord
from trainers.config import CycleConfig
from trainers.policy_rollouts import PolicyRollouts
from trainers.processes import Processes
from trainers.retrieval_log import RetrievalEvent
from trainers.rewards import TurnRewardFn, compute_turn_rewards
from trainers.sampling import collect_groups


def collect_rollout(
    runner: PolicyRollouts,
    config: CycleConfig,
    processes: Processes,
    rewards: list[TurnRewardFn],
    goal_order: list[int],
    *,
    cycle: int,
    cursor: int,
) -> dict[str, Any]:
    """Play cycle ``cycle``'s groups from goal position ``cursor``; returns ``rollout.json``'s data.

    Keys: ``episodes`` (every episode played, dropped groups too), ``kept_groups`` (group ids),
    ``dropped_groups``, ``failed_groups``, ``goals_used``, ``cursor_end``, ``seconds``,
    ``retrievals`` (held-back events as dicts) and ``retrievals_recorded`` (False).
    """

    def returns(episodes: list[EpisodeRecord]) -> list[float]:
        return [sum(r) for r in compute_turn_rewards(episodes, rewards)]

    started = time.perf_counter()
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
                temperature=config.train_temperature,
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
    return {
        "episodes": collection.rolled_out,
        "kept_groups": kept,
        "dropped_groups": collection.dropped_groups,
        "failed_groups": collection.failed_groups,
        "goals_used": collection.goals_used,
        "cursor_end": cursor + len(collection.goals_used),
        "seconds": time.perf_counter() - started,
        "retrievals": [e.to_dict() for e in held],
        "retrievals_recorded": False,
    }


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
