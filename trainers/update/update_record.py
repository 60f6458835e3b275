"""What a cycle's GRPO update trained on, turn by turn (``cycles/<c>/advantages.json``).

The update computes each turn's advantage from the kept groups' episodes
(:func:`trainers.update.advantages.compute_advantages`) and keeps no trace of it; this record writes
down its parts, A(a_t) = A^E(tau) + w * A^S(a_t) (GiGPO Eq. 8), with the shaped turn rewards
they came from and why a turn was left out of the loss, so a reader (``skillrl view``) shows
the numbers the update used instead of recomputing them under settings it would have to guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from skillrl_core.records import EpisodeRecord
from trainers.update.advantages import TurnAdvantages


@dataclass
class TurnAdvantage:
    """One turn's share of the update."""

    turn: int
    """0-based turn index within its episode."""
    reward: float
    """The shaped turn reward the returns were computed from."""
    step_advantage: float
    """A^S(a_t): the turn's return normalised among turns of its group at the same page."""
    advantage: float
    """A(a_t) = A^E + w * A^S: what the loss weighs the turn's tokens by."""
    left_out: str = ""
    """Why the loss left the turn out ("" when it trained on it)."""


@dataclass
class EpisodeAdvantage:
    """One trained episode's advantages."""

    episode_id: str
    """The episode (``EpisodeRecord.episode_id``)."""
    group: str
    """Its GRPO group (``EpisodeRecord.group``)."""
    episode_return: float
    """R(tau): the sum of its shaped turn rewards."""
    episode_advantage: float
    """A^E(tau): its return normalised within its group."""
    turns: list[TurnAdvantage] = field(default_factory=list)
    """Each turn's parts, in order."""


@dataclass
class UpdateRecord:
    """Every episode the update trained on, with the weight that combined the parts."""

    step_weight: float
    """w in A = A^E + w * A^S (``GRPOConfig.step_weight``)."""
    episodes: list[EpisodeAdvantage] = field(default_factory=list)
    """The kept groups' episodes, in the order the update saw them."""

    def by_episode(self) -> dict[str, EpisodeAdvantage]:
        """Return the episodes keyed by episode id."""
        return {e.episode_id: e for e in self.episodes}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``advantages.json`` holds)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UpdateRecord:
        """Inverse of :meth:`to_dict`."""
        episodes = [
            EpisodeAdvantage(
                **{k: v for k, v in e.items() if k != "turns"},
                turns=[TurnAdvantage(**t) for t in e.get("turns", [])],
            )
            for e in data.get("episodes", [])
        ]
        return cls(step_weight=float(data["step_weight"]), episodes=episodes)


def update_record(
    episodes: Sequence[EpisodeRecord],
    rewards: Sequence[Sequence[float]],
    advantages: TurnAdvantages,
    left_out: Sequence[Sequence[str]],
    *,
    step_weight: float,
) -> UpdateRecord:
    """Return the record of an update over ``episodes`` (all sequences in the same order).

    ``rewards`` are the shaped turn rewards, ``left_out`` each turn's reason for being left out
    of the loss (``trainers.update.batching.turn_left_out``; "" when trained).
    """
    rows = zip(
        episodes,
        rewards,
        advantages.episode,
        advantages.step,
        advantages.advantages,
        advantages.returns,
        left_out,
        strict=True,
    )
    return UpdateRecord(
        step_weight=step_weight,
        episodes=[
            EpisodeAdvantage(
                episode_id=episode.episode_id,
                group=episode.group,
                episode_return=float(episode_return),
                episode_advantage=float(a_episode),
                turns=[
                    TurnAdvantage(t.turn, float(r), float(s), float(a), reason)
                    for t, r, s, a, reason in zip(
                        episode.turns, turn_rewards, a_step, a_turn, reasons, strict=True
                    )
                ],
            )
            for episode, turn_rewards, a_episode, a_step, a_turn, episode_return, reasons in rows
        ],
    )
