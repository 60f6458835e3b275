"""benchmarks/bench_run_record.py: a run's own figures, read from its folder and rendered."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_run_record  # noqa: E402


def _run(folder: Path, test: dict | None) -> Path:
    folder.mkdir()
    rows = [
        {"cycle": 0, "eval.episodes": 100, "eval.success_rate": 0.41, "eval.mean_score": 0.41,
         "cycle.seconds": 120.0},
        {"cycle": 1, "train.success_rate": 0.5, "cycle.seconds": 60.0},
        {"cycle": 2, "eval.episodes": 100, "eval.success_rate": 0.47, "eval.mean_score": 0.47,
         "train.success_rate": 0.55, "cycle.seconds": 180.0},
    ]  # fmt: skip
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    best = {
        "cycle": 2,
        "checkpoint": "checkpoints/cycle-0002",
        "evaluation": {"cycle": 2, "successes": 47, "episodes": 100, "mean_score": 0.47},
        "evaluation_split": "eval",
        "stopped_early_after": None,
        "test": test,
    }
    (folder / "best.json").write_text(json.dumps(best))
    return folder


def test_every_cycle_and_the_chosen_ones_test_pairing_are_rendered(tmp_path, monkeypatch):
    test = {"goals": 50, "start_successes": 20, "chosen_successes": 30, "won": 12, "lost": 2,
            "p_value": 0.0129, "start_mean_score": 0.4, "chosen_mean_score": 0.6}  # fmt: skip
    rows, choice = bench_run_record.read_run(_run(tmp_path / "run", test))
    monkeypatch.setattr(bench_run_record, "run_text", lambda r: "machine")
    text = bench_run_record.report(
        {"run_command": "skillrl train", "wall_minutes": 6.0, "history": rows, "choice": choice}
    )
    assert "| 0 | 41/100 | 0.410 | - | 2.0 |" in text
    assert "| 1 | not evaluated |  | 50% | 1.0 |" in text
    assert "| 2 | 47/100 (chosen) | 0.470 | 55% | 3.0 |" in text
    assert "| 50 | 20 | 30 | [0.46, 0.72] | 12 / 2 | 0.0129 | 0.400 -> 0.600 | resolved |" in text


def test_a_folder_without_metrics_is_refused_by_name(tmp_path):
    with pytest.raises(SystemExit, match="no metrics.jsonl"):
        bench_run_record.read_run(tmp_path)
