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


def test_no_rendered_command_or_prose_names_a_machines_absolute_path():
    text = (ROOT / "docs" / "results.md").read_text()
    found = re.findall(r"(?<![\w.])/(?:work|root|home|tmp|Users)/\S*", text)
    assert not found, found[:3]
