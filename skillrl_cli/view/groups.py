"""One training cycle's GRPO groups side by side, from what the run folder holds.

A cycle's ``rollout.json`` has every episode played and the groups kept; ``advantages.json``
(written by the update since it was added) has each trained turn's advantage and its parts.
Why a group was dropped is decided the way ``trainers.cycle.sampling.collect_groups`` decides it: a
group with an episode that ended on an error is dropped as failed; under dynamic sampling a
group whose returns were all equal is dropped for carrying no signal. Nothing is recomputed: a
cycle without ``advantages.json`` shows no advantages, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from skillrl_core.records import EpisodeRecord, TurnRecord
from trainers.cycle.cycle_rollout import RolloutPhase
from trainers.update.update_record import EpisodeAdvantage, TurnAdvantage, UpdateRecord


@dataclass(frozen=True)
class GroupTurn:
    """One turn of one episode, with what the update made of it."""

    turn: TurnRecord
    """The turn as played."""
    advantage: TurnAdvantage | None
    """Its advantage and parts (None: not trained, or not recorded)."""


@dataclass(frozen=True)
class GroupEpisode:
    """One episode of a group, turn by turn."""

    episode: EpisodeRecord
    """The episode as played."""
    advantage: EpisodeAdvantage | None
    """Its return and episode-level advantage (None: not trained, or not recorded)."""
    turns: list[GroupTurn]
    """Its turns, in order."""


@dataclass(frozen=True)
class GroupView:
    """One goal's G episodes of a cycle and the keep / drop decision on them."""

    group_id: str
    """The group (``c<cycle>-g<goal>`` for training rollouts)."""
    goal_id: str
    """The goal its episodes played."""
    instruction: str
    """The goal's instruction."""
    kept: bool
    """Whether the update trained on it."""
    reason: str
    """Why it was kept or dropped."""
    episodes: list[GroupEpisode]
    """Its episodes, in play order."""

    @property
    def longest(self) -> int:
        """Turns of its longest episode (rows of the side-by-side table)."""
        return max((len(e.turns) for e in self.episodes), default=0)


def group_reason(episodes: list[EpisodeRecord], kept: bool, dynamic_sampling: bool) -> str:
    """Return why a group was kept or dropped, as ``collect_groups`` decided it."""
    errors = [e.error for e in episodes if e.error]
    if kept:
        if dynamic_sampling:
            return "kept: its episodes' returns differ, so it carries a learning signal"
        return "kept: dynamic sampling was off, so every group without an error trains"
    if errors:
        return f"dropped: an episode ended on an error ({errors[0]})"
    return "dropped: every episode got the same return, so no advantage (no signal)"


def cycle_groups(
    phase: RolloutPhase, record: UpdateRecord | None, *, dynamic_sampling: bool
) -> list[GroupView]:
    """Return the cycle's groups in play order, kept and dropped, with their advantages."""
    kept = set(phase.kept_groups)
    trained = record.by_episode() if record is not None else {}
    members: dict[str, list[EpisodeRecord]] = {}
    for episode in phase.episodes:
        members.setdefault(episode.group, []).append(episode)
    views = []
    for group_id, episodes in members.items():
        rows = []
        for episode in episodes:
            advantage = trained.get(episode.episode_id)
            by_turn = {t.turn: t for t in advantage.turns} if advantage is not None else {}
            turns = [GroupTurn(t, by_turn.get(t.turn)) for t in episode.turns]
            rows.append(GroupEpisode(episode, advantage, turns))
        first = episodes[0]
        views.append(
            GroupView(
                group_id=group_id,
                goal_id=first.goal_id,
                instruction=first.instruction,
                kept=group_id in kept,
                reason=group_reason(episodes, group_id in kept, dynamic_sampling),
                episodes=rows,
            )
        )
    return views
