"""Dynamic sampling (DAPO, Yu et al. 2025, Sec. 3.2): keep only groups that carry signal.

A group whose episodes all earned the same return has zero episode-level advantage for every
member, so it only costs compute. :func:`collect_groups` rolls out groups, drops those, and tops
up from further goals until it has the number it wants or runs out of rounds, and reports how
many groups it dropped. Departure from DAPO: DAPO over-samples a fixed batch and filters; we
ask only for the deficit each round, which wastes fewer rollouts on a slow CPU.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from skillrl_core.records import EpisodeRecord

_EQUAL_TOL = 1e-9

RolloutFn = Callable[[list[int]], list[EpisodeRecord]]
"""Rolls out one group per goal index and returns all their episodes (with ``group_id`` set)."""
ReturnsFn = Callable[[Sequence[EpisodeRecord]], list[float]]
"""The return R(tau) of each episode (the sum of its turn rewards)."""


@dataclass
class GroupCollection:
    """What :func:`collect_groups` gathered."""

    episodes: list[EpisodeRecord] = field(default_factory=list)
    """Episodes of the kept groups (what the update trains on)."""
    rolled_out: list[EpisodeRecord] = field(default_factory=list)
    """Every episode rolled out, kept or dropped (all of them go to the trajectory store)."""
    kept_groups: int = 0
    dropped_groups: int = 0
    """Groups dropped for carrying no signal (all returns equal)."""
    failed_groups: int = 0
    """Groups dropped because one of their episodes ended on an error (``EpisodeRecord.error``):
    its turns did not all happen, so its return would bias the whole group's baseline."""
    rounds: int = 0
    goals_used: list[int] = field(default_factory=list)


def signal_groups(episodes: Sequence[EpisodeRecord], returns: Sequence[float]) -> dict[str, bool]:
    """For each group id: whether its returns differ (max - min > 0) and so carry signal."""
    by_group: dict[str, list[float]] = defaultdict(list)
    for episode, value in zip(episodes, returns, strict=True):
        by_group[episode.group].append(float(value))
    return {g: max(v) - min(v) > _EQUAL_TOL for g, v in by_group.items()}


def collect_groups(
    rollout: RolloutFn,
    goals: Iterator[int],
    returns: ReturnsFn,
    *,
    wanted: int,
    dynamic: bool = True,
    max_topup_rounds: int = 3,
) -> GroupCollection:
    """Roll out ``wanted`` groups; with ``dynamic``, drop no-signal groups and top up."""
    result = GroupCollection()
    while result.rounds <= (max_topup_rounds if dynamic else 0):
        need = wanted - result.kept_groups
        if need <= 0:
            break
        batch = [goal for _, goal in zip(range(need), goals, strict=False)]
        if not batch:
            break
        result.rounds += 1
        result.goals_used.extend(batch)
        episodes = rollout(batch)
        result.rolled_out.extend(episodes)
        failed = {e.group for e in episodes if e.error}
        signal = signal_groups(episodes, returns(episodes)) if dynamic else {}
        groups = {e.group for e in episodes}
        keep = {g for g in groups - failed if signal.get(g, True)}
        result.episodes.extend(e for e in episodes if e.group in keep)
        result.kept_groups += len(keep)
        result.failed_groups += len(failed)
        result.dropped_groups += len(groups) - len(keep) - len(failed)
    return result
