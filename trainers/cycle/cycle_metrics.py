"""What one improvement cycle measured: :class:`CycleMetrics`, built by its phases, written once.

Each phase of :class:`trainers.cycle.cycle.TrainingRun` fills its own section (the training
rollouts, the groups kept, the update, the evaluation, the bank's changes); the cycle's ``save``
writes the whole as one row of ``metrics.jsonl`` and ``state.json``'s history
(:meth:`CycleMetrics.to_row`: ``section.field`` keys, the file format trackers and ``skillrl view``
read), and the CLI prints the same object from memory. A cycle in progress keeps its sections in
``state.json``'s ``current`` (the same row form), so a resumed cycle picks them up with
:meth:`from_row`.

Readers that take single figures from rows (the learning curve, run listings, ``skillrl view``'s
charts, the training benchmarks' summaries, whose rows may hold a section in part) name them by
the key constants below, not by strings of their own; readers of whole rows take
:meth:`CycleMetrics.from_row`'s typed sections. Light on purpose:
no torch (``StepMetrics`` is imported only where an update is read back), so those readers can
import it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from skillrl_core.records import EpisodeRecord
from skillrl_core.significance import discordant, mcnemar_exact
from trainers.common.episode_metrics import EpisodeSummary
from trainers.common.metric_rows import read_section, section_keys

if TYPE_CHECKING:
    from trainers.update.grpo import StepMetrics


@dataclass(frozen=True)
class TrainingRollouts:
    """The training episodes a cycle rolled out (every group, kept or dropped)."""

    episodes: int
    success_rate: float
    mean_score: float
    mean_turns: float
    invalid_action_rate: float
    """Invalid actions / turns."""

    @classmethod
    def of(cls, summary: EpisodeSummary) -> TrainingRollouts:
        """Take the training figures of an :class:`EpisodeSummary`."""
        return cls(**{f.name: getattr(summary, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class GroupCounts:
    """What dynamic sampling did with the cycle's groups."""

    kept: int
    """Groups the update trains on."""
    dropped: int
    """Groups with no reward signal (every episode the same return)."""
    failed: int
    """Groups with an episode that ended on an error."""


@dataclass(frozen=True)
class RolloutCost:
    """What the training rollouts cost."""

    seconds: float
    model_seconds: float
    """Of ``seconds``, in the policy (generation and scoring)."""
    forwarded_tokens: int


@dataclass(frozen=True)
class UpdateFigures:
    """The GRPO update of the cycle."""

    step: StepMetrics
    """What ``GRPOTrainer.train_step`` did."""
    step_groups_shared: int
    """Turns whose step-level group held more than one turn (GiGPO's anchor states)."""
    sync_seconds: float | None = None
    """Seconds pushing the new weights to the rollout policy (None: it shares them)."""

    def to_row(self) -> dict[str, Any]:
        """Return the ``update.*`` keys of a metrics row."""
        row = {f"update.{k}": v for k, v in asdict(self.step).items()}
        row[UPDATE_TOKENS_PER_SECOND] = self.step.tokens_per_second
        row[UPDATE_STEP_GROUPS_SHARED] = self.step_groups_shared
        if self.sync_seconds is not None:
            row["update.sync_seconds"] = self.sync_seconds
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> UpdateFigures | None:
        """Read the ``update.*`` keys back (None: the row has no update)."""
        from trainers.update.grpo import (
            StepMetrics,  # the trainer's record: torch, only when read back
        )

        if UPDATE_LOSS not in row:
            return None
        step = StepMetrics(
            **{
                f.name: row[f"update.{f.name}"]
                for f in fields(StepMetrics)
                if f"update.{f.name}" in row
            }
        )
        return cls(step, int(row.get(UPDATE_STEP_GROUPS_SHARED, 0)), row.get("update.sync_seconds"))


@dataclass(frozen=True)
class BankChanges:
    """What the cycle did to the skill bank (None: that phase did not run)."""

    distilled_added: int | None = None
    distilled_merged: int | None = None
    retired: int | None = None
    """Entries bank upkeep retired after distilling."""
    evolved_entries: int | None = None
    """Entries added or refined from validation failures."""
    size: int | None = None
    """Entries in the bank at the end of the cycle."""
    snapshot: str | None = None
    """The snapshot taken at the end of the cycle."""
    churn: int | None = None
    """Entries added, removed or changed since the previous cycle's snapshot."""

    def merged(self, newer: BankChanges) -> BankChanges:
        """Return these changes with every figure ``newer`` holds taking its place."""
        given = {f.name: getattr(newer, f.name) for f in fields(self)}
        return dataclasses.replace(self, **{k: v for k, v in given.items() if v is not None})


@dataclass(frozen=True)
class SkillSensitivity:
    """The evaluation's open turns scored again with placebo entries (``skillrl.sensitivity``)."""

    turns: int
    """Evaluation turns whose choice was open and whose prompt held entries."""
    changed_share: float
    """Share of them whose greedy action a placebo swap changes."""
    mean_kl: float
    """Mean KL divergence between the two distributions over the candidates."""

    @classmethod
    def of(cls, figures: dict[str, Any]) -> SkillSensitivity:
        """Return the section from a probe's overall figures (``skillrl.sensitivity``).

        Those may hold more than a cycle records (win/loss counts against a reference).
        """
        return cls(**{f.name: figures[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class BankWorth:
    """The evaluation goals played twice by the same weights, paired goal by goal.

    Once with the bank as it was at cycle 0, once with the bank the run has distilled into and
    evolved: what the run's changes to the bank are worth to the policy being trained.
    """

    goals: int
    starting_successes: int
    """Evaluation goals solved with the cycle-0 bank."""
    evolved_successes: int
    """... with the bank as it is now (the cycle's ``eval.successes``)."""
    won: int
    """Goals solved with the evolved bank only."""
    lost: int
    """Goals solved with the cycle-0 bank only."""
    p_value: float
    """Exact two-sided McNemar p on the discordant goals."""

    @classmethod
    def of(cls, starting: Sequence[EpisodeRecord], evolved: Sequence[EpisodeRecord]) -> BankWorth:
        """Pair two plays of the same goals (same order): cycle-0 bank, evolved bank."""
        lost, won = discordant((e.success for e in starting), (e.success for e in evolved))
        return cls(
            goals=len(starting),
            starting_successes=sum(bool(e.success) for e in starting),
            evolved_successes=sum(bool(e.success) for e in evolved),
            won=won,
            lost=lost,
            p_value=mcnemar_exact(lost, won),
        )


_SECTIONS: dict[str, type] = {
    "train": TrainingRollouts,
    "groups": GroupCounts,
    "rollout": RolloutCost,
    "eval": EpisodeSummary,
    "sensitivity": SkillSensitivity,
    "bank_worth": BankWorth,
}
"""Sections whose fields are all present or all absent, by row prefix."""

EVAL_SUCCESS_RATE = "eval.success_rate"
EVAL_EPISODES = "eval.episodes"
EVAL_MEAN_SCORE = "eval.mean_score"
TRAIN_SUCCESS_RATE = "train.success_rate"
TRAIN_EPISODES = "train.episodes"
TRAIN_MEAN_SCORE = "train.mean_score"
GROUPS_KEPT = "groups.kept"
GROUPS_DROPPED = "groups.dropped"
UPDATE_LOSS = "update.loss"
UPDATE_STEP_GROUPS_SHARED = "update.step_groups_shared"
UPDATE_KL = "update.kl"
UPDATE_CLIP_HIGH_FRACTION = "update.clip_high_fraction"
UPDATE_TOKENS_PER_SECOND = "update.tokens_per_second"
BANK_SIZE = "bank.size"
SENSITIVITY_CHANGED_SHARE = "sensitivity.changed_share"
BANK_WORTH_WON = "bank_worth.won"
BANK_WORTH_LOST = "bank_worth.lost"
BANK_WORTH_P_VALUE = "bank_worth.p_value"
CYCLE_SECONDS = "cycle.seconds"
"""Row keys readers name, each once (a test checks that :meth:`CycleMetrics.to_row` writes it)."""


@dataclass(frozen=True)
class CycleMetrics:
    """Everything one cycle measured; a section is None when its phase did not run."""

    cycle: int
    train: TrainingRollouts | None = None
    """The training rollouts."""
    groups: GroupCounts | None = None
    rollout: RolloutCost | None = None
    update: UpdateFigures | None = None
    eval: EpisodeSummary | None = None
    """The fixed evaluation goals (None: not an evaluated cycle, ``--eval-every``)."""
    sensitivity: SkillSensitivity | None = None
    """How much the evaluation's choices depend on what its entries say (None: not measured)."""
    bank_worth: BankWorth | None = None
    """The evaluation replayed with the cycle-0 bank, paired (None: not measured,
    ``CycleConfig.compare_starting_bank``)."""
    bank: BankChanges = field(default_factory=BankChanges)
    seconds: float | None = None
    """Wall seconds of the cycle in this process (a resumed cycle counts its resumed part)."""
    checkpoint: str | None = None
    """The checkpoint saved at the end of the cycle, if one was."""

    def with_figures(self, **sections: Any) -> CycleMetrics:
        """Return these metrics with ``sections`` set (bank figures join the ones held)."""
        if "bank" in sections:
            sections["bank"] = self.bank.merged(sections["bank"])
        return dataclasses.replace(self, **sections)

    def to_row(self) -> dict[str, Any]:
        """Return the metrics as one flat row (``section.field`` keys), the file format."""
        row: dict[str, Any] = {"cycle": self.cycle}
        for prefix in _SECTIONS:
            section = getattr(self, prefix)
            if section is not None:
                row.update(section_keys(prefix, section))
        if self.update is not None:
            row.update(self.update.to_row())
        row.update({f"bank.{k}": v for k, v in asdict(self.bank).items() if v is not None})
        if self.seconds is not None:
            row[CYCLE_SECONDS] = self.seconds
        if self.checkpoint is not None:
            row["checkpoint"] = self.checkpoint
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> CycleMetrics:
        """Read a row back (a section some of whose keys are missing counts as absent)."""
        sections = {prefix: read_section(kind, prefix, row) for prefix, kind in _SECTIONS.items()}
        bank = {f.name: row.get(f"bank.{f.name}") for f in fields(BankChanges)}
        return cls(
            cycle=int(row["cycle"]),
            update=UpdateFigures.from_row(row),
            bank=BankChanges(**bank),
            seconds=row.get(CYCLE_SECONDS),
            checkpoint=row.get("checkpoint"),
            **sections,
        )
