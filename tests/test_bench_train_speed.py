"""The train_speed benchmark: its per-arm sums, its report, and one real arm on a tiny model."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "trainers"))

from bench_train_speed import report, run_arm, summarise  # noqa: E402


def row(arm: str, episodes: int, seconds: float, rate: float) -> dict:
    return {
        "arm": arm, "round": 1, "flags": [], "episodes": episodes, "turns": episodes * 5.0,
        "training_success": 0.5, "cycle_seconds": seconds, "rollout_seconds": seconds / 2,
        "update_seconds": seconds / 3, "episodes_per_hour": episodes / seconds * 3600,
        "rollout_model_seconds": seconds / 3, "rollout_forwarded_tokens": 1000,
        "rollout_gflops": rate, "update_tokens_per_second": 900.0, "update_samples": 10,
        "logprob_gap_mean": 0.01, "ratio_mean": 1.0, "clip_high_fraction": 0.01,
        "process_seconds": seconds + 20,
        "machine": {"matmul_gflops": 400.0, "bf16_matmul_gflops": 800.0, "load_average": 2.0},
    }  # fmt: skip


def test_arms_sum_their_runs_and_are_set_against_the_first():
    rows = [
        row("float32", 64, 400, 200),
        row("bf16 rollouts", 64, 300, 300),
        row("bf16 rollouts", 64, 200, 340),
        row("float32", 64, 400, 220),
    ]
    arms = summarise(rows)
    assert [a["arm"] for a in arms] == ["float32", "bf16 rollouts"]
    base, fast = arms
    assert base["episodes_per_hour"] == pytest.approx(128 / 800 * 3600)
    assert fast["episodes_per_hour"] == pytest.approx(128 / 500 * 3600)
    assert fast["vs_baseline"] == pytest.approx(800 / 500)
    assert fast["rollout_gflops"] == pytest.approx(320)
    text = report_of(rows, arms, linear_weights=106_168_320)
    assert "| bf16 rollouts | 128 (640) | 500 |" in text and "| 1.60x |" in text
    assert "| 0.80 / 0.40 |" in text  # 320 GFLOP/s of 400 (fp32) and 800 (bf16)
    assert "106.2M linear weights" in text
    assert text.count("| - |") == 2  # rows recorded before the update's rate show none


def test_the_update_rate_counts_the_blocks_its_backward_crosses():
    from bench_train_speed import backward_layers, seconds_at_matmul_rate, update_gflops

    whole = {
        **row("float32", 64, 300, 200),
        "update_forwarded_positions": 10_000,
        "rollout_forwarded_tokens": 1000,
    }
    top = {**whole, "flags": ["--no-bf16", "--lora-layers", "10"]}
    assert backward_layers(whole["flags"], 30) == 30 and backward_layers(top["flags"], 30) == 10
    # 100 s of update: (2 + 2) x 1e9 weights x 1e4 positions, or (2 + 2/3) x ... for the top 10.
    assert update_gflops(whole, 10**9, 30) == pytest.approx(4e13 / 100 / 1e9)
    assert update_gflops(top, 10**9, 30) == pytest.approx((2 + 2 / 3) * 1e13 / 100 / 1e9)
    # At the matmul rate (400 GFLOP/s): the rollout's 2e12 and the update's 4e13 FLOPs take
    # 105 s, the rest of the 300 s cycle (200 - 100 s in the model) stays.
    floor = seconds_at_matmul_rate(whole, 10**9, 30)
    assert floor == pytest.approx(300 - 100 - 100 + (2e12 + 4e13) / 400e9)
    arms = summarise([{**whole, "update_gflops": 400.0, "seconds_at_matmul_rate": floor}])
    assert arms[0]["episodes_per_hour_at_matmul_rate"] == pytest.approx(64 / floor * 3600)
    emulated = {**whole, "machine": {**whole["machine"], "bf16_matmul_gflops": 1.0}}
    # bf16 slower than fp32 (emulated): no bf16 share.
    assert "| 0.50 / - |" in report_of([emulated], summarise([emulated]))
    text = report_of([whole], arms)
    assert "| 400 (1.00) |" in text
    assert f"| float32 | 300 | {floor:.0f} | {64 / floor * 3600:.0f} |" in text


def report_of(rows: list[dict], arms: list[dict], linear_weights: int = 10**9) -> str:
    """The report of a result that ran ``rows`` in their order."""
    return report(
        {
            "provenance": {
                "command": "python -m benchmarks train_speed",
                "commit": "abc",
                "started": "2026-12-05T00:00:00",
                "machine_at_start": {"matmul_gflops": 400.0, "load_average": 2.0},
            },
            "args": {"config": "configs/webshop-rft.yaml", "goals_per_cycle": 16},
            "linear_weights": linear_weights,
            "order": [r["arm"] for r in rows],
            "rows": rows,
            "arms": arms,
        }
    )


@pytest.mark.slow
def test_one_arm_trains_one_cycle_and_reads_its_figures(tmp_path, monkeypatch):
    from tiny_checkpoint import write_tiny_checkpoint

    model = write_tiny_checkpoint(tmp_path / "model")
    config = tmp_path / "tiny.yaml"
    config.write_text(
        f"model: {model}\nestimator: rft\ndynamic-sampling: false\ngroup-size: 2\n"
        "max-turns: 2\nmax-new-tokens: 8\nvalidation-goals: 0\nskills: false\nlora: true\n"
        "lora-r: 4\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(ROOT)  # the arm runs `python -m cli`
    args = argparse.Namespace(
        config=str(config), goals_per_cycle=1, threads=1, linear_weights=1000, decoder_layers=2
    )
    result = run_arm("bf16 rollouts", 1, args, tmp_path / "out")
    assert result["episodes"] == 2 and result["cycle_seconds"] > 0
    assert result["rollout_forwarded_tokens"] > 0 and result["rollout_gflops"] > 0
    # RFT trains only on successes, which the tiny model may not reach: positions follow samples.
    assert (result["update_forwarded_positions"] > 0) == (result["update_samples"] > 0)
    assert result["machine"]["bf16_matmul_gflops"] > 0
