"""Usage statistics of entries: how useful an entry has been to the episodes that saw it."""

from __future__ import annotations

from memory.types import Entry


def success_rate(successes: int, episodes: int) -> float:
    """Laplace-smoothed success rate ``(s + 1) / (n + 2)`` (0.5 with no evidence)."""
    return (successes + 1) / (episodes + 2)


def entry_utility(entry: Entry, totals: tuple[int, int]) -> float:
    """Lift of an entry: its episodes' success rate minus the baseline rate.

    ``totals`` is ``(episodes, successes)`` for the entry's env/category (see
    ``SkillBank.episode_totals``). Both rates are Laplace-smoothed, so an entry never retrieved
    in a finished episode scores 0 whatever the baseline.
    """
    if entry.episodes_retrieved == 0:
        return 0.0
    episodes, successes = totals
    return success_rate(entry.success_episodes, entry.episodes_retrieved) - success_rate(
        successes, episodes
    )
