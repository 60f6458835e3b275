"""benchmarks/bench_revisions.py: two commits timed alike, and the ratio it reports."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_revisions  # noqa: E402


def _results(before: list[float], after: list[float]) -> dict:
    def times(walls):
        return [{"wall_seconds": w, "cpu_seconds": 2 * w} for w in walls]

    return {
        "provenance": {"command": "x", "commit": "abc", "started": "now", "machine_at_start": {}},
        "args": {"repeats": len(before)},
        "workloads": {"run": ["run", "--json"]},
        "commits": {"before": "a" * 40, "after": "b" * 40},
        "timings": {"run": {"before": times(before), "after": times(after)}},
    }


def test_the_ratio_is_after_over_before_of_the_medians():
    results = _results([10.0, 30.0, 11.0], [12.0, 13.0, 100.0])
    summary = bench_revisions.summarise(results)["run"]
    assert summary["before"]["wall_seconds"] == 11.0  # a slow outlier does not move a median
    assert summary["after"]["wall_seconds"] == 13.0
    assert summary["ratio"]["wall_seconds"] == pytest.approx(13.0 / 11.0)
    assert summary["ratio"]["cpu_seconds"] == pytest.approx(13.0 / 11.0)


def test_the_report_names_both_commits_and_the_ratio(monkeypatch):
    results = _results([10.0], [9.0])
    results["summary"] = bench_revisions.summarise(results)
    monkeypatch.setattr(bench_revisions, "run_text", lambda r: "machine")
    text = bench_revisions.report(results)
    assert "`aaaaaaa`" in text and "`bbbbbbb`" in text
    assert "| `skillrl run` | 10.0 | 9.0 | 0.90 |" in text


def test_an_unknown_revision_is_refused_by_name(tmp_path):
    with pytest.raises(SystemExit, match="no-such-rev"):
        bench_revisions.check_out("no-such-rev", tmp_path / "tree")
    assert not (tmp_path / "tree").exists()
