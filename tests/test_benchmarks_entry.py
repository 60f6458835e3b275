"""``python -m benchmarks`` lists every benchmark and refuses a name it does not know."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_the_listing_names_every_benchmark_script():
    listed = run().stdout
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        assert script.stem.removeprefix("bench_") in listed
    assert "render_results" in listed


def test_an_unknown_name_is_refused_naming_the_choices():
    result = run("no_such_bench")
    assert result.returncode == 2 and "no benchmark 'no_such_bench'" in result.stderr
    assert "cold_start_curve" in result.stderr
