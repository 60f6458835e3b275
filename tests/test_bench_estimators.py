"""benchmarks/bench_estimators.py: arms parsed, runs read, arms paired and rendered."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_estimators  # noqa: E402


def _outcomes(successes: list[bool]) -> list[dict]:
    return [
        {"goal_index": i, "success": s, "score": 1.0 if s else 0.5} for i, s in enumerate(successes)
    ]


def _cycle(cycle: int, rollout: float, update: float, success: float) -> dict:
    return {
        "cycle": cycle,
        "rollout_seconds": rollout,
        "update_seconds": update,
        "training_success": success,
        "samples": 100,
        "completion_tokens": 900,
        "optimizer_steps": 7,
        "ratio_mean": 1.0,
        "clip_high_fraction": 0.01,
        "grad_norm": 0.2,
        "policy_loss": -0.5,
        "groups_kept": 32,
        "groups_dropped": 0,
        "turns_used": 120,
        "turns_weighted": 110,
        "advantage_positive": 80.4,
        "advantage_negative": -60.2,
    }


def test_an_arm_is_a_letter_a_name_and_flags():
    arm = bench_estimators.parse_arm("g: GRPO, turn-level=--estimator grpo --step-weight 1")
    assert arm == {"letter": "g", "name": "GRPO, turn-level", "flags": "--estimator grpo "
                   "--step-weight 1"}  # fmt: skip
    named = bench_estimators.parse_arm("g: GRPO (w = 1)=--step-weight 1 --env-option a=b")
    assert (named["name"], named["flags"]) == ("GRPO (w = 1)", "--step-weight 1 --env-option a=b")
    assert bench_estimators.parse_arm("s: as the recipe=")["flags"] == ""
    for wrong in ("g --estimator grpo", "GRPO=--estimator grpo", ": name=--x", "g: x=1"):
        with pytest.raises(argparse.ArgumentTypeError, match="LETTER: NAME=FLAGS"):
            bench_estimators.parse_arm(wrong)


def test_a_runs_trained_cycles_and_their_training_seconds_are_read(tmp_path):
    from trainers.cycle.cycle_metrics import (
        CycleMetrics,
        GroupCounts,
        RolloutCost,
        TrainingRollouts,
        UpdateFigures,
    )
    from trainers.update.grpo import StepMetrics

    rows = [CycleMetrics(cycle=0).to_row()]
    for cycle, (rollout, update) in enumerate([(100.0, 50.0), (90.0, 60.0)], start=1):
        rows.append(
            CycleMetrics(
                cycle=cycle,
                train=TrainingRollouts(128, 0.25 * cycle, 0.5, 5.0, 0.0),
                groups=GroupCounts(kept=30, dropped=2, failed=0),
                rollout=RolloutCost(seconds=rollout, model_seconds=rollout, forwarded_tokens=1),
                update=UpdateFigures(StepMetrics(samples=40, seconds=update), 3),
            ).to_row()
        )
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    read = bench_estimators.cycle_rows(tmp_path)
    assert [r["cycle"] for r in read] == [1, 2]
    assert read[1]["training_success"] == 0.5 and read[0]["samples"] == 40
    assert bench_estimators.training_seconds(read, 1) == 150.0
    assert bench_estimators.training_seconds(read, 2) == 300.0


def test_pairing_refuses_arms_that_played_other_goals():
    base = _outcomes([True, False, True])
    other = [dict(o, goal_index=o["goal_index"] + 1) for o in base]
    with pytest.raises(SystemExit, match="same goals"):
        bench_estimators.pair(base, other)
    paired = bench_estimators.pair(base, _outcomes([False, True, True]))
    assert (paired["won"], paired["lost"]) == (1, 1) and paired["p_value"] == 1.0


def test_the_report_pairs_every_arm_with_the_start_and_each_rft_cycle():
    start = [False] * 20 + [True] * 10
    rft = [True] * 18 + [False] * 2 + [True] * 10
    grpo = [True] * 2 + [False] * 18 + [True] * 10
    references = [
        {"label": "start", "cycle": 0, "training_seconds": 0.0, "outcomes": _outcomes(start)},
        {"label": "RFT cycle 2", "cycle": 2, "training_seconds": 600.0,
         "outcomes": _outcomes(rft)},
    ]  # fmt: skip
    arm = {"letter": "g", "name": "GRPO", "flags": "--estimator grpo",
           "cycles": [_cycle(1, 200.0, 250.0, 0.4), _cycle(2, 190.0, 260.0, 0.5)],
           "training_seconds": 900.0, "test": {"outcomes": _outcomes(grpo)}}  # fmt: skip
    comparisons = [
        {"arm": "g", "against": r["label"], **bench_estimators.pair(r["outcomes"], _outcomes(grpo))}
        for r in references
    ]
    results = {
        "provenance": {"command": "python -m benchmarks estimators", "commit": "abc1234",
                       "started": "2026-12-05T13:00:00+00:00",
                       "machine_at_start": {"matmul_gflops": 300.0, "load_average": 0.5,
                                            "cores": 2}},
        "args": {"goals": 30},
        "machine_before": {"matmul_gflops": 300.0, "load_average": 0.5, "cores": 2},
        "machine_at_end": {"matmul_gflops": 310.0, "load_average": 1.5, "cores": 2},
        "reference_cycles": [_cycle(1, 100.0, 100.0, 0.3), _cycle(2, 100.0, 300.0, 0.6)],
        "references": references,
        "arms": [arm],
        "comparisons": comparisons,
    }  # fmt: skip
    text = bench_estimators.report(results)
    assert "| RFT cycle 2 | 2 | 10.0 | 30%, 60% | 28/30 |" in text
    assert "| 18 / 0, 7.6e-06 |" in text  # RFT cycle 2 against the start
    assert "| g: GRPO | 2 | 15.0 | 40%, 50% | 12/30 |" in text
    assert "| g | RFT cycle 2 | 0 / 16 | 3.05e-05 | resolved worse |" in text
    assert "| g | 2 | 100 | 900 | 110 | 80 / -60 | 7 | 1.0000 | 0.0100 | 0.2000 |" in text
