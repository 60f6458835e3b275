"""A cycle's metrics: one typed object, written as the row metrics.jsonl has always held."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trainers.common.episode_metrics import EpisodeSummary
from trainers.cycle.cycle_metrics import (
    BankChanges,
    BankWorth,
    CycleMetrics,
    GroupCounts,
    RolloutCost,
    SkillSensitivity,
    TrainingRollouts,
    UpdateFigures,
)
from trainers.update.grpo import StepMetrics

ROW = {
    "cycle": 2,
    "train.episodes": 16, "train.success_rate": 0.5, "train.mean_score": 0.7,
    "train.mean_turns": 5.5, "train.invalid_action_rate": 0.0,
    "groups.kept": 3, "groups.dropped": 1, "groups.failed": 0,
    "rollout.seconds": 12.5, "rollout.model_seconds": 10.0, "rollout.forwarded_tokens": 9000,
    "update.samples": 40, "update.substituted_turns": 1, "update.completion_tokens": 300,
    "update.total_tokens": 12000, "update.forwarded_positions": 7000,
    "update.optimizer_steps": 2, "update.loss": -0.01,
    "update.policy_loss": -0.01, "update.kl": 0.0, "update.clip_low_fraction": 0.0,
    "update.clip_high_fraction": 0.01, "update.ratio_mean": 1.0, "update.grad_norm": 0.3,
    "update.logprob_gap_mean": 0.001, "update.logprob_gap_max": 0.01, "update.seconds": 15.0,
    "update.tokens_per_second": 800.0, "update.step_groups_shared": 4,
    "eval.episodes": 10, "eval.success_rate": 0.6, "eval.mean_score": 0.8,
    "eval.mean_turns": 6.0, "eval.invalid_action_rate": 0.0, "eval.tokens_per_episode": 3000.0,
    "eval.completion_tokens_per_episode": 40.0,
    "bank.distilled_added": 2, "bank.distilled_merged": 1, "bank.retired": 0,
    "bank.evolved_entries": 1, "bank.size": 30, "bank.snapshot": "run-cycle-0002",
    "bank.churn": 4,
    "cycle.seconds": 61.0,
    "checkpoint": "runs/run/checkpoints/cycle-0002",
}  # fmt: skip
"""A row as a run wrote it before the metrics were typed (every section present)."""


def test_a_row_reads_into_typed_sections_and_writes_back_the_same():
    metrics = CycleMetrics.from_row(ROW)
    assert metrics.train == TrainingRollouts(16, 0.5, 0.7, 5.5, 0.0)
    assert metrics.groups == GroupCounts(3, 1, 0) and metrics.rollout == RolloutCost(
        12.5, 10.0, 9000
    )
    assert metrics.update.step.loss == -0.01 and metrics.update.step_groups_shared == 4
    assert metrics.eval.successes == 6 and metrics.bank.size == 30
    assert metrics.to_row() == ROW


def test_an_unevaluated_cycle_has_no_eval_section_and_writes_no_eval_keys():
    row = {k: v for k, v in ROW.items() if not k.startswith("eval.")}
    metrics = CycleMetrics.from_row(row)
    assert metrics.eval is None and metrics.to_row() == row


def test_phases_add_their_figures_and_bank_figures_join_the_ones_held():
    metrics = CycleMetrics(cycle=1).with_figures(bank=BankChanges(distilled_added=2, retired=0))
    metrics = metrics.with_figures(bank=BankChanges(evolved_entries=3))
    assert metrics.bank == BankChanges(distilled_added=2, retired=0, evolved_entries=3)
    step = StepMetrics(samples=4, total_tokens=100, seconds=2.0, loss=0.5)
    metrics = metrics.with_figures(update=UpdateFigures(step, 0, sync_seconds=0.25))
    row = metrics.to_row()
    assert row["update.tokens_per_second"] == 50.0 and row["update.sync_seconds"] == 0.25
    assert row["bank.evolved_entries"] == 3 and "bank.size" not in row
    assert CycleMetrics.from_row(row) == metrics


def test_a_section_missing_a_key_reads_as_absent():
    row = {"cycle": 0, "eval.success_rate": 0.5}  # a damaged or partial row
    assert CycleMetrics.from_row(row).eval is None
    summary = EpisodeSummary(4, 0.5, 0.5, 3.0, 0.0, 100.0, 10.0)
    assert CycleMetrics.from_row(CycleMetrics(0, eval=summary).to_row()).eval == summary


def test_every_key_readers_name_is_one_a_full_row_holds():
    from trainers.cycle import cycle_metrics

    full = CycleMetrics.from_row(ROW).with_figures(
        sensitivity=SkillSensitivity(turns=4, changed_share=0.25, mean_kl=0.1),
        bank_worth=BankWorth(10, 5, 6, won=2, lost=1, p_value=1.0),
    )
    keys = {v for k, v in vars(cycle_metrics).items() if k.isupper() and isinstance(v, str)}
    assert {"eval.success_rate", "update.loss", "cycle.seconds"} <= keys
    assert keys <= set(full.to_row())


def test_the_metric_readers_load_without_torch():
    # The run list, the learning curve and skillrl view's charts name the keys through
    # trainers.cycle.cycle_metrics; reading a run must not load the trainer's torch.
    script = (
        "import sys\nimport trainers.cycle.cycle_metrics, trainers.runs, skillrl_cli.view.charts\n"
        "print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=300)  # fmt: skip
    assert done.stdout.strip() == "False", done.stderr
