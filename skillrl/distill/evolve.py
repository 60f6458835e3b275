"""Evolution from validation: weak categories get a few new or refined entries.

When a category's validation success rate is below ``threshold``, its failed **training** episodes
are distilled (never the validation episodes themselves: what the agent is measured on must not
leak into its bank), the resulting drafts are ranked by how many failures they explain, and at
most ``max_new_entries`` are added. A draft that merges into an existing entry refines it (the
bank strengthens it); each records why it was added: the validation evidence and its sources.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memory.types import EntryDraft
from skillrl.distill.analytic import fold_duplicates
from skillrl.distill.base import Distiller
from skillrl.distill.leakage import draft_leaks
from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord
from skillrl_core.validation import check_finite_fields

if TYPE_CHECKING:
    from memory.bank import SkillBank

logger = logging.getLogger(__name__)
AUTHOR = "evolution"


@dataclass
class EvolveConfig:
    """Settings of evolution from validation."""

    threshold: float = 0.4
    """Evolve a category whose validation success rate is below this."""
    max_new_entries: int = 3
    """Most entries added or refined per category per call."""
    max_failures: int = 32
    """Most recent failed training episodes analysed per category."""
    min_validation_episodes: int = 2
    """Categories with fewer validation episodes are not judged."""
    train_split: str = "train"
    """The split whose failed episodes are analysed (never the validation episodes' own)."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if not self.train_split:
            raise ConfigError("train_split must name a split")
        if not 0.0 < self.threshold <= 1.0:
            raise ConfigError(f"threshold ({self.threshold}) must be in (0, 1]")
        for name in ("max_new_entries", "max_failures", "min_validation_episodes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} ({getattr(self, name)}) must be >= 1")


@dataclass
class CategoryEvolution:
    """What evolution did for one weak category."""

    env: str
    category: str
    validation_episodes: int
    validation_successes: int
    failures_analysed: int
    added: list[str] = field(default_factory=list)
    refined: list[str] = field(default_factory=list)
    reason: str = ""


@dataclass
class EvolveReport:
    """Every category evolution looked at and changed."""

    evolved: list[CategoryEvolution] = field(default_factory=list)
    healthy: dict[str, float] = field(default_factory=dict)
    """``env/category`` -> validation success rate of categories left alone."""


def validation_rates(validation: list[EpisodeRecord]) -> dict[tuple[str, str], tuple[int, int]]:
    """``(episodes, successes)`` per (env, category)."""
    rates: dict[tuple[str, str], tuple[int, int]] = {}
    for episode in validation:
        n, s = rates.get((episode.env_id, episode.category), (0, 0))
        rates[(episode.env_id, episode.category)] = (n + 1, s + int(episode.success))
    return rates


def training_failures(
    bank: SkillBank, env: str, category: str, exclude: set[str], limit: int, split: str = "train"
) -> list[EpisodeRecord]:
    """Return the latest failed training episodes of a category, none of them in ``exclude``."""
    failures = [
        e
        for e in bank.trajectories.episodes(env=env, split=split, success=False)
        if e.category == category and e.episode_id not in exclude and e.split == split
    ]
    return failures[-limit:]


def _best(drafts: list[EntryDraft], sources: list[EpisodeRecord], limit: int) -> list[EntryDraft]:
    clean = [d for d in fold_duplicates(drafts) if not draft_leaks(d, sources)]
    return sorted(clean, key=lambda d: len(d.trajectory_ids), reverse=True)[:limit]


def evolve_category(
    bank: SkillBank,
    distiller: Distiller,
    record: CategoryEvolution,
    failures: list[EpisodeRecord],
    config: EvolveConfig,
) -> None:
    """Distill ``failures``, add the few drafts that explain most of them, fill ``record``."""
    rate = record.validation_successes / record.validation_episodes
    drafts = _best(distiller.distill(failures), failures, config.max_new_entries)
    for draft in drafts:
        draft.reason = (
            f"evolution: validation success {record.validation_successes}/"
            f"{record.validation_episodes} ({rate:.2f}) < {config.threshold:.2f} in "
            f"{record.env}/{record.category}; explains {len(draft.trajectory_ids)} of "
            f"{len(failures)} failed training episodes"
        )
    for result in bank.add_many(drafts, author=AUTHOR):
        (record.refined if result.merged else record.added).append(result.entry.id)
    record.reason = f"validation success {rate:.2f} below {config.threshold:.2f}"


def evolve_from_validation(
    bank: SkillBank,
    distiller: Distiller,
    validation: list[EpisodeRecord],
    config: EvolveConfig | None = None,
) -> EvolveReport:
    """Add or refine a few entries for each category whose validation success is too low."""
    config = config or EvolveConfig()
    report = EvolveReport()
    exclude = {e.episode_id for e in validation}
    for (env, category), (n, s) in sorted(validation_rates(validation).items()):
        if n < config.min_validation_episodes or s / n >= config.threshold:
            report.healthy[f"{env}/{category}"] = s / n
            continue
        failures = training_failures(
            bank, env, category, exclude, config.max_failures, config.train_split
        )
        record = CategoryEvolution(env, category, n, s, len(failures))
        if failures:
            evolve_category(bank, distiller, record, failures, config)
        else:
            record.reason = "validation success is low but there are no failed training episodes"
        logger.info("evolution %s/%s: %s", env, category, record.reason)
        report.evolved.append(record)
    return report
