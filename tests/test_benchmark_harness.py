"""benchmarks/harness.py: machine figures, provenance, the stopwatch and result files."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import harness  # noqa: E402


@pytest.fixture
def quick_machine(monkeypatch):
    """A 1024^3 matmul ten times is too slow for a unit test; the rest of machine() is real."""
    monkeypatch.setattr(harness, "matmul_gflops", lambda: 123.44)


def test_machine_holds_matmul_rate_load_and_cores(quick_machine):
    figures = harness.machine()
    assert set(figures) == {"matmul_gflops", "load_average", "cores"}
    assert figures["matmul_gflops"] == 123.4  # rounded to 0.1
    assert figures["cores"] == os.cpu_count()
    assert isinstance(figures["load_average"], float) and figures["load_average"] >= 0
    assert harness.machine_text(figures).startswith("matmul 123 GFLOP/s, load ")


def test_matmul_gflops_measures_a_positive_rate():
    assert harness.matmul_gflops(size=32, repeats=2) > 0


def test_provenance_says_command_commit_start_and_machine(quick_machine, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_demo.py", "--goals", "4", "--out", "a b.json"])
    before = datetime.now(timezone.utc)
    made = harness.provenance("demo")
    assert set(made) == {"command", "commit", "started", "machine_at_start"}
    assert made["command"] == "python -m benchmarks demo --goals 4 --out 'a b.json'"
    # This checkout is a git repository: HEAD's hash, perhaps marked dirty.
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", made["commit"])
    started = datetime.fromisoformat(made["started"])
    assert started.utcoffset() == timedelta(0)
    assert abs(started - before) < timedelta(minutes=1)
    assert made["machine_at_start"]["matmul_gflops"] == 123.4


def test_commit_is_none_without_git(monkeypatch):
    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(harness.subprocess, "run", no_git)
    assert harness.commit() is None


def test_commit_is_none_outside_a_repository(monkeypatch, tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.setattr(harness, "HERE", tmp_path)
    assert harness.commit() is None


def test_commit_marks_changed_tracked_files_dirty_but_not_untracked_ones(monkeypatch, tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", "code.py")
    git("commit", "-q", "-m", "first")
    head = git("rev-parse", "HEAD")
    monkeypatch.setattr(harness, "HERE", tmp_path)
    (tmp_path / "results.json").write_text("{}")  # untracked: not a change to the code
    assert harness.commit() == head
    (tmp_path / "code.py").write_text("x = 2\n")
    assert harness.commit() == f"{head}+dirty"


def test_write_result_adds_provenance_and_machine_at_end(quick_machine, tmp_path):
    target = tmp_path / "out" / "result.json"
    results = {"b": 1, "a": {"where": tmp_path}}
    written = harness.write_result(target, results, name="demo")
    assert written == target
    data = json.loads(target.read_text())
    assert data["b"] == 1 and data["a"] == {"where": str(tmp_path)}  # a Path as its str
    assert list(data)[:2] == ["b", "a"]  # the benchmark's own order
    assert data["provenance"]["command"].startswith("python -m benchmarks demo")
    assert data["machine_at_end"]["matmul_gflops"] == 123.4
    assert os.listdir(target.parent) == ["result.json"]  # no temp file left behind


def test_write_result_keeps_the_first_provenance(quick_machine, tmp_path):
    target = tmp_path / "result.json"
    results = {"rounds": {}}
    harness.write_result(target, results, name="demo")
    first = results["provenance"]  # kept on the dict, so the next write reuses it
    results["rounds"]["0"] = 0.5
    harness.write_result(target, results, name="demo")
    assert json.loads(target.read_text())["provenance"] == first
    resumed = json.loads(target.read_text())  # a resumed run reads its file back
    harness.write_result(target, resumed, name="other")
    assert json.loads(target.read_text())["provenance"] == first


def test_stopwatch_measures_wall_and_cpu_seconds():
    with harness.Stopwatch() as clock:
        time.sleep(0.02)
        inside = clock.wall
        deadline = time.perf_counter() + 0.02
        while time.perf_counter() < deadline:  # busy: CPU time
            pass
    assert 0.02 <= inside <= clock.wall
    assert clock.wall >= 0.04
    assert 0 < clock.cpu <= clock.wall + 0.05
    frozen = clock.wall
    time.sleep(0.005)
    assert clock.wall == frozen  # stopped when the block ended


def test_a_stopwatch_never_started_refuses_to_answer():
    with pytest.raises(RuntimeError, match="never started"):
        _ = harness.Stopwatch().wall


def test_run_text_names_command_commit_day_and_the_machine_at_both_ends():
    results = {
        "provenance": {
            "command": "python -m benchmarks x --out x.json",
            "commit": "0123456789abcdef",
            "started": "2026-12-02T20:00:00+00:00",
            "machine_at_start": {"matmul_gflops": 400.0, "load_average": 0.5, "cores": 2},
        },
        "machine_at_end": {"matmul_gflops": 300.0, "load_average": 1.25, "cores": 2},
    }
    assert harness.run_text(results) == (
        "`python -m benchmarks x --out x.json` (commit `0123456`, 2026-12-02); machine at "
        "start: matmul 400 GFLOP/s, load 0.50, at the end: matmul 300 GFLOP/s, load 1.25"
    )
    del results["machine_at_end"], results["provenance"]["commit"]
    assert "(commit `unknown`" in harness.run_text(results)
    assert harness.run_text(results).endswith("load 0.50")


def test_portable_command_keeps_no_machine_path():
    text = (
        "python -m benchmarks x --model /w/wt-a/skillrl/adapters/webshop --out /w/ev/arms "
        "--reference start=/w/ev/arms/d/eval.json --env-option data_dir=/home/u/data --lr 1e-4"
    )
    assert harness.portable_command(text) == (
        "python -m benchmarks x --model skillrl/adapters/webshop --out out/arms "
        "--reference start=out/eval.json --env-option data_dir=out/data --lr 1e-4"
    )
    assert (
        harness.portable_command("--out out/x.json --ratio 1/2") == "--out out/x.json --ratio 1/2"
    )
