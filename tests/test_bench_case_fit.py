"""The case_fit and case_reach benchmarks: the figure over all goals, the margin rule, reports."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_case_fit import over_all_goals, reference_arg  # noqa: E402
from bench_case_reach import served, shortfalls  # noqa: E402
from bench_skill_value import _record  # noqa: E402

RECORDED = ROOT / "docs" / "results" / "skill_value_sensitivity.json"


def test_a_later_reference_replaces_an_earlier_ones_outcomes_goal_by_goal(tmp_path):
    reference = json.loads(RECORDED.read_text())
    episodes = reference["episodes"]["skills"]
    flipped = [dict(e, success=False) for e in episodes[:3]]
    later = tmp_path / "later.json"
    later.write_text(json.dumps({"episodes": {"now": flipped}}))
    first = _record(episodes[3])
    whole = over_all_goals(
        [(RECORDED, "skills"), (later, "now")],
        {"nearest": [_record(e) for e in flipped], "fit": [first]},
        50,
    )
    recorded = sum(_record(e).success for e in episodes[:50])
    lost = sum(_record(e).success for e in episodes[:3])
    assert whole["goals"] == 50
    assert whole["reference_successes"] == recorded - lost
    assert whole["successes"] == recorded - lost  # goal 3 replayed as recorded
    assert whole["replayed_agree"] == whole["replayed"] == 3


def test_a_reference_names_its_file_and_arm(tmp_path):
    (tmp_path / "run.json").write_text("{}")
    assert reference_arg(f"{tmp_path}/run.json:skills") == (tmp_path / "run.json", "skills")
    for bad in ("run.json", f"{tmp_path}/missing.json:skills", ":skills"):
        try:
            reference_arg(bad)
        except SystemExit as refused:
            assert "--reference" in str(refused)
        else:
            raise AssertionError(f"{bad!r} was accepted")


def row(similarity: float, lacks: bool, full: bool) -> dict:
    return {"similarity": similarity, "lacks": lacks, "full": full, "options_missed": int(lacks),
            "over_price": False, "attributes_missed": 0}  # fmt: skip


def test_a_margin_serves_the_nearest_case_not_known_to_lack_within_reach():
    rows = [row(0.90, True, False), row(0.87, True, False), row(0.86, False, True)]
    assert served(rows, 0.0) is rows[0]
    assert served(rows, 0.03) is rows[0]  # the one within reach lacks too: the nearest stays
    assert served(rows, 0.05) is rows[2]
    assert served([], 0.05) == {"full": False}
    assert shortfalls([rows[0], rows[2]]) == {
        "goals": 1, "an option": 1, "the price": 0, "an attribute": 0
    }  # fmt: skip
