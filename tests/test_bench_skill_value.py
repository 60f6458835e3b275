"""The skill_value benchmark's sensitivity table: the expert's own changes beside the policy's."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_skill_value import reference_cells, report  # noqa: E402

RECORDED = ROOT / "docs" / "results" / "skill_value_sensitivity.json"


def test_the_expert_columns_show_the_turns_the_entries_decide_and_how_many_the_policy_follows():
    assert reference_cells({"reference_asked": 0}) == "- | -"
    assert reference_cells({}) == "- | -"  # recorded before the expert was asked
    figures = {"reference_asked": 20, "reference_changes": 5, "reference_changes_followed": 4}
    assert reference_cells(figures) == "0.25 | 0.80"
    assert reference_cells({**figures, "reference_changes": 0}) == "0.00 | -"


def test_the_report_renders_the_expert_columns_for_every_page():
    results = json.loads(RECORDED.read_text())
    assert "- | - |" in report(results)  # the recorded run did not ask the expert twice
    asked = copy.deepcopy(results)
    sense = asked["sensitivity"]
    for figures in [sense["overall"], *sense["by_page"].values()]:
        figures.update(
            reference_asked=figures["turns"],
            reference_changes=figures["turns"] // 2,
            reference_changes_followed=figures["turns"] // 4,
        )
    text = report(asked)
    assert "the expert's action changed | of those, the policy's changed too |" in text
    overall = sense["overall"]
    share = overall["reference_changes"] / overall["turns"]
    followed = overall["reference_changes_followed"] / overall["reference_changes"]
    assert f"| {share:.2f} | {followed:.2f} |" in text
    assert "- | - |" not in text


def test_another_workspaces_bank_is_an_arm_of_its_own_named_by_its_label():
    results = json.loads(RECORDED.read_text())
    other = copy.deepcopy(results)
    other["args"]["bank_label"] = "the cases shipped before"
    other["other_bank_entries"], other["other_bank_cases"] = 689, 648
    other["rows"].append({**other["rows"][0], "arm": "bank"})
    text = report(other)
    assert "; arm (i): the cases shipped before (689 entries, 648 of them cases)." in text
    assert "| (i) as (a), the bank of another workspace |" in text
    assert "arm (i)" not in report(results)
