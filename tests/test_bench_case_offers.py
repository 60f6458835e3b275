"""The case_offers benchmark: the figure over all goals, and its report."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_case_offers import over_all_goals, report  # noqa: E402
from bench_prompt_budget import paired  # noqa: E402
from bench_skill_value import _record  # noqa: E402

RECORDED = ROOT / "docs" / "results" / "skill_value_sensitivity.json"


def plays() -> tuple[dict, list, list]:
    reference = json.loads(RECORDED.read_text())
    episodes = [_record(e) for e in reference["episodes"]["skills"]]
    changed = episodes[:4]
    flipped = [dataclasses.replace(e, success=not e.success) for e in changed]
    return reference, changed, flipped


def test_the_figure_over_all_goals_takes_this_runs_outcome_only_where_the_case_changed():
    reference, changed, flipped = plays()
    whole = over_all_goals(reference, {"before": changed, "now": flipped}, 50)
    assert whole["goals"] == 50 and whole["reference_successes"] == 44
    kept = 44 - sum(e.success for e in changed)
    assert whole["successes"] == kept + sum(e.success for e in flipped)
    assert whole["replayed_agree"] == whole["replayed"] == 4
    disagree = over_all_goals(reference, {"before": flipped, "now": flipped}, 50)
    assert disagree["replayed_agree"] == 0


def test_the_report_names_the_changed_goals_both_plays_and_the_pairing():
    reference, changed, flipped = plays()
    row = {**reference["rows"][0], "goals": 4}
    results = {
        "provenance": reference["provenance"],
        "args": {"goals": 50, "max_turns": 8, "observation_mode": "text_rich",
                 "max_prompt_tokens": 512},
        "bank_entries": {"before": 689, "now": 1009},
        "bank_cases": {"before": 648, "now": 968},
        "changed_goals": [0, 1, 2, 3],
        "served_offers_wanted": {"before": {"all": 40, "changed": 1},
                                 "now": {"all": 48, "changed": 4}},
        "rows": [{**row, "arm": "before"}, {**row, "arm": "now"}],
        "paired": paired(changed, flipped),
        "over_all_goals": over_all_goals(reference, {"before": changed, "now": flipped}, 50),
    }  # fmt: skip
    text = report(results)
    assert "the served case differs on 4 of them" in text
    assert "before 689 entries (648 cases), now 1009 (968 cases)" in text
    assert "| before -> now, the changed goals |" in text
    assert "on 1 (before), 4 (now); of all 50 goals, on 40 (before), 48 (now)." in text
    assert "matched the reference on 4 of the 4 goals it replayed" in text
