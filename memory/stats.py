"""Usage statistics of entries: how useful an entry has been to the episodes that saw it.

Utility of an entry = (success rate of skill-using episodes that retrieved it) - (success rate of
the skill-using episodes of the same env/category that did not). The "with" rate is the posterior
mean under a Beta prior centred on the "without" rate::

    base = (s_without + 1) / (n_without + 2)                          # Laplace
    rate_with = (s_with + m * base) / (n_with + m)                    # Beta(m*base, m*(1-base))
    utility = rate_with - base

so a new entry starts at utility 0 and ``m`` (``prior_strength``) pseudo-episodes of evidence must
be outweighed before one bad episode moves it much. This one formula ranks entries in
``skillrl skills list --sort utility`` and decides what bank upkeep retires.

Baselines count only episodes recorded with skills enabled, so expert or skills-off episodes
(which never retrieve anything and mostly succeed) do not make every entry look harmful.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory.types import Entry

if TYPE_CHECKING:
    from memory.bank import SkillBank

PRIOR_STRENGTH = 4.0
"""Default pseudo-episodes of the Beta prior."""

Scope = tuple[str | None, str | None]
"""(env, category) whose episodes form an entry's baseline; (None, None) means all."""


def success_rate(successes: int, episodes: int) -> float:
    """Laplace-smoothed success rate ``(s + 1) / (n + 2)`` (0.5 with no evidence)."""
    return (successes + 1) / (episodes + 2)


def utility_from_counts(
    s_with: int, n_with: int, s_total: int, n_total: int, prior_strength: float = PRIOR_STRENGTH
) -> float:
    """Posterior success-rate difference (module docstring): with the entry minus without it."""
    n_without = max(n_total - n_with, 0)
    s_without = min(max(s_total - s_with, 0), n_without)
    base = success_rate(s_without, n_without)
    rate_with = (s_with + prior_strength * base) / (n_with + prior_strength)
    return rate_with - base


def utility_scope(entry: Entry) -> Scope:
    """Return the scope an entry is compared against: its env/category, or all (general)."""
    return (None, None) if entry.kind == "general" else (entry.env, entry.category)


def entry_utility(
    entry: Entry, totals: tuple[int, int], prior_strength: float = PRIOR_STRENGTH
) -> float:
    """Return the utility of ``entry`` given ``(episodes, successes)`` of its scope."""
    n_total, s_total = totals
    return utility_from_counts(
        entry.success_episodes, entry.episodes_retrieved, s_total, n_total, prior_strength
    )


class ScopeTotals:
    """``(episodes, successes)`` of skill-using episodes per scope, read from SQL once each."""

    def __init__(self, bank: SkillBank) -> None:
        self._bank = bank
        self._cache: dict[Scope, tuple[int, int]] = {}

    def of(self, entry: Entry) -> tuple[int, int]:
        """Return the totals of the scope ``entry`` is measured against."""
        scope = utility_scope(entry)
        if scope not in self._cache:
            env, category = scope
            self._cache[scope] = self._bank.trajectories.episode_totals(
                env=env, category=category, skills_only=True
            )
        return self._cache[scope]
