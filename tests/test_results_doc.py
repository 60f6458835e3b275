"""docs/results.md's tables are what the benchmarks' JSON in docs/results/ renders to."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_every_rendered_table_matches_its_json():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from render_results import RESULTS, render

    text = RESULTS.read_text()
    assert "<!-- render: " in text
    assert render(text) == text, "run `python benchmarks/render_results.py`"


def test_a_results_file_is_rendered_by_the_benchmark_with_the_longest_matching_name():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from render_results import benchmark_of

    assert benchmark_of("cold_start_curve_rich") == "cold_start_curve"
    assert benchmark_of("cold_start_bc_dagger") == "cold_start"
    assert benchmark_of("expert") == "expert" and benchmark_of("sokoban_expert") == "sokoban_expert"
    assert benchmark_of("train_cycles_sokoban") == "train_cycles"
    with pytest.raises(SystemExit, match="no benchmark wrote"):
        benchmark_of("cold")


MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|root|home|tmp|Users)/[^\s\"']*")
"""An absolute path of one machine (a workspace, a home, a temp folder)."""

DOCS = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "docs" / "results").glob("*.json")]
)
"""What a reader of the repository reads: the README, the docs and the kept benchmark results."""


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_doc_or_kept_result_names_a_machines_absolute_path(path):
    found = [
        f"line {number}: {match}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in MACHINE_PATH.findall(line)
    ]
    assert not found, found[:3]


@pytest.mark.parametrize("path", [p for p in DOCS if p.suffix == ".md"], ids=lambda p: p.name)
def test_no_doc_names_an_issue_number(path):
    found = re.findall(r"\bissues? #?\d+|(?<![\w&/])#\d{2,}\b", path.read_text(encoding="utf-8"))
    assert not found, found[:3]


def test_the_path_check_catches_a_machine_path():
    assert MACHINE_PATH.findall('"out": "/work/evidence/grpo/arms",') == [
        "/work/evidence/grpo/arms"
    ]
    assert MACHINE_PATH.findall("--model ~/models/x --out out/arms") == []
