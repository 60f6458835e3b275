"""Distill the bank's undistilled episodes and write the results through the bank's add API.

Idempotent: a batch's drafts go in with one ``bank.add_many`` transaction (all or none) and its
episodes are then marked distilled (``bank.mark_distilled``), so a second pass finds nothing to do,
and a pass stopped by an error (a teacher out of retries) leaves every finished batch complete and
every later one untouched. (Were the process killed between those two transactions, the batch
would be distilled again next time and its drafts would merge into the entries they made, raising
their support counts once more: nothing is lost or duplicated.)
Every draft goes through :func:`~skillrl.distill.leakage.draft_leaks` against its own source
episodes before it reaches the bank, whichever distiller wrote it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory.types import EntryDraft
from skillrl.distill.analytic import fold_duplicates
from skillrl.distill.base import Distiller, DistillReport, Rejection
from skillrl.distill.cases import case_drafts
from skillrl.distill.leakage import draft_leaks
from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord
from skillrl_core.validation import check_finite_fields

if TYPE_CHECKING:
    from memory.bank import SkillBank

logger = logging.getLogger(__name__)


@dataclass
class PipelineConfig:
    """Which episodes a distillation pass takes, and how many at a time."""

    env: str | None = None
    """Only episodes of this environment (None: all)."""
    splits: tuple[str, ...] | None = ("train",)
    """Only episodes of these splits (None: all). Validation and test episodes are left out by
    default so that what the agent is evaluated on never leaks into its bank."""
    batch_size: int = 64
    """Episodes per distiller call; each batch is added and marked distilled before the next."""
    limit: int | None = None
    """Distill at most this many episodes in this pass (None: all pending)."""
    cases: bool = True
    """Also file a case for each solved episode (``skillrl.distill.cases``), whichever
    distiller writes the skills and notes."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.batch_size < 1:
            raise ConfigError(f"batch_size ({self.batch_size}) must be >= 1")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"limit ({self.limit}) must be >= 1 or None")
        if self.splits is not None and not self.splits:
            raise ConfigError("splits must name at least one split, or be None for all")


def pending_episodes(bank: SkillBank, config: PipelineConfig) -> list[EpisodeRecord]:
    """Undistilled episodes the pass should take, oldest first as the bank returns them."""
    if config.splits is None:
        episodes = bank.trajectories.episodes(env=config.env, distilled=False)
    else:
        episodes = [
            e
            for split in config.splits
            for e in bank.trajectories.episodes(env=config.env, split=split, distilled=False)
        ]
    return episodes[: config.limit] if config.limit else episodes


def write_drafts(
    bank: SkillBank,
    drafts: list[EntryDraft],
    sources: list[EpisodeRecord],
    author: str,
    report: DistillReport,
) -> None:
    """Add the clean drafts in one transaction (merge on insert happens there); note rejections."""
    by_id = {e.episode_id: e for e in sources}
    clean = []
    for draft in drafts:
        leaks = draft_leaks(draft, [by_id[i] for i in draft.trajectory_ids if i in by_id])
        if leaks:
            report.rejected.append(Rejection(draft.title, leaks, list(draft.trajectory_ids)))
            logger.warning("rejected draft %r: %s", draft.title, "; ".join(leaks))
        else:
            clean.append(draft)
    for result in bank.add_many(clean, author=author):
        entry_id = result.entry.id
        if entry_id in report.added or entry_id in report.merged:
            continue  # merged into an entry this pass already counted
        (report.merged if result.merged else report.added).append(entry_id)


def distill_pending(
    bank: SkillBank, distiller: Distiller, config: PipelineConfig | None = None
) -> DistillReport:
    """Distill every pending episode, add the drafts, mark the episodes distilled."""
    config = config or PipelineConfig()
    started = time.perf_counter()
    report = DistillReport(distiller=distiller.name)
    episodes = pending_episodes(bank, config)
    report.episodes_seen = len(episodes)
    author = f"distiller:{distiller.name}"
    for start in range(0, len(episodes), config.batch_size):
        batch = episodes[start : start + config.batch_size]
        drafts = fold_duplicates(distiller.distill(batch))
        if config.cases:
            drafts += case_drafts(batch)
        report.drafts += len(drafts)
        write_drafts(bank, drafts, batch, author, report)
        bank.trajectories.mark_distilled([e.episode_id for e in batch], distiller=distiller.name)
        report.episodes_distilled += len(batch)
        logger.info("distilled %d/%d episodes", report.episodes_distilled, len(episodes))
    report.seconds = time.perf_counter() - started
    return report
