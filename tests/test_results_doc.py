"""docs/results.md's tables are what the benchmarks' JSON in docs/results/ renders to."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_rendered_table_matches_its_json():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from render_results import RESULTS, render

    text = RESULTS.read_text()
    assert "<!-- render: " in text
    assert render(text) == text, "run `python benchmarks/render_results.py`"
