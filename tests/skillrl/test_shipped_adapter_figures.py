"""The figures a shipped adapter records are the ones its benchmark measured.

A shipped adapter's ``skillrl.json`` names the result file its test figures come from
(``figures.results``); the figures ``run`` and ``--model auto`` print must be that file's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillrl.policies.model_settings import SHIPPED_ADAPTERS, ModelSettings
from trainers.common.episode_metrics import wilson_interval

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("env_id", sorted(p.name for p in SHIPPED_ADAPTERS.iterdir() if p.is_dir()
                                          and (p / "skillrl.json").exists()))  # fmt: skip
def test_a_shipped_adapters_test_figures_are_its_benchmarks(env_id):
    figures = ModelSettings.load(SHIPPED_ADAPTERS / env_id).figures
    if "results" not in figures:
        pytest.skip(f"the {env_id} adapter names no result file")
    result = json.loads((ROOT / figures["results"]).read_text(encoding="utf-8"))
    settings = ModelSettings.load(SHIPPED_ADAPTERS / env_id)
    if "rows" in result:  # bench_skill_value: the arm with the policy's own entries
        arm = next(row for row in result["rows"] if row["arm"] == "skills")
        successes, goals, score = arm["successes"], arm["goals"], arm["mean_score"]
    else:  # bench_eval_arms: the arm the adapter is played in (entries on or off)
        played = "on" if settings.skills else "off"
        greedy = next(a for a in result["arms"] if a["arm"] == played)["greedy"]
        goals, score = greedy["episodes"], greedy["mean_score"]
        successes = round(greedy["success_rate"] * goals)
    assert (figures["test_successes"], figures["test_goals"]) == (successes, goals)
    assert figures["test_mean_score"] == pytest.approx(score, abs=1e-4)
    low, high = wilson_interval(successes, goals)
    assert figures["test_success_ci95"] == pytest.approx([low, high])
    assert figures["max_turns"] == result["args"]["max_turns"]
