"""The evolution_room benchmark: its oracle cases are real cases, and how changes are counted."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_case_reach import goal_options  # noqa: E402
from bench_evolution_room import (  # noqa: E402
    alternative_cases,
    changes,
    policy_failures,
    report,
    validation_cases,
)

from envs.webshop.config import WebShopConfig  # noqa: E402
from envs.webshop.expert import search_query  # noqa: E402
from envs.webshop.reward import get_reward  # noqa: E402
from envs.webshop.world import shared_world  # noqa: E402

_PRODUCT = re.compile(r"click\[(\w+)\]")


def served(*rows: tuple[str, bool]) -> list[dict]:
    return [{"title": title, "full": full} for title, full in rows]


def test_changes_count_wins_and_losses_only_where_the_served_case_changes():
    start = served(("a", False), ("b", True), ("c", False), ("d", True))
    now = served(("a", False), ("x", False), ("y", True), ("z", True))
    row = changes("both", {"starting": start, "both": now}, failed={2, 3})
    assert row["changed"] == 3  # goals 1, 2, 3
    assert (row["wins"], row["losses"]) == (1, 1)  # goal 2 gained, goal 1 lost; 3 stays full
    assert row["full"] == 2
    assert row["wins_on_failed"] == 1
    assert row["p"] == pytest.approx(1.0)
    assert changes("starting", {"starting": start}, None)["changed"] == 0


def test_policy_failures_read_a_recorded_arm_and_refuse_a_missing_goal(tmp_path):
    run = tmp_path / "run.json"
    episodes = [{"goal_id": "g0", "success": True}, {"goal_id": "g1", "success": False}]
    run.write_text(json.dumps({"episodes": {"skills": episodes}}))
    assert policy_failures(f"{run}:skills", ["g0", "g1"]) == {1}
    with pytest.raises(SystemExit, match="g2"):
        policy_failures(f"{run}:skills", ["g0", "g2"])


def test_alternative_cases_name_other_products_that_earn_the_full_reward():
    world = shared_world(WebShopConfig())
    by_goal = alternative_cases(world, range(30), "text_rich")
    assert sorted(by_goal) == list(range(30))
    drafts = [d for goal_drafts in by_goal.values() for d in goal_drafts]
    assert drafts, "no training goal among the first 30 has a second full-reward product"
    goals = [world.goals[i] for i in world.split("train")[:30]]
    for draft in drafts:
        assert draft.kind == "case" and draft.env == "webshop"
        assert draft.offers  # what the product comes in, as a case keeps it
        asin = _PRODUCT.search(draft.title).group(1).upper()
        product = world.catalog.by_asin[asin]
        earns = [
            goal
            for goal in goals
            if search_query(goal.instruction_text) == draft.when_to_apply
            and goal.asin != asin
            and get_reward(
                product, goal, world.catalog.prices[asin], goal_options(product, goal)
            ).reward
            >= 1.0
        ]
        assert earns, f"{draft.title} earns the full reward for no request it answers"


def test_validation_cases_are_the_libraries_cases_of_solved_eval_goals():
    by_goal = validation_cases(range(3), "text_rich")
    assert sorted(by_goal) == [0, 1, 2]
    drafts = [d for goal_drafts in by_goal.values() for d in goal_drafts]
    assert 1 <= len(drafts) <= 3
    assert all(d.kind == "case" and _PRODUCT.search(d.title) for d in drafts)
    assert validation_cases(range(0), "text_rich") == {}


def test_report_names_each_bank_and_the_policy_bound():
    results = {
        "provenance": {
            "command": "python -m benchmarks evolution_room",
            "commit": "abc1234",
            "started": "2026-12-06T09:00:00+00:00",
            "machine_at_start": {"matmul_gflops": 60.0, "load_average": 0.5, "cores": 2},
        },
        "machine_at_end": {"matmul_gflops": 60.0, "load_average": 0.5, "cores": 2},
        "args": {
            "goals": 4,
            "validation_goals": 2,
            "recipe_training_goals": 3,
            "recipe_validation_goals": 1,
            "outcomes": "run.json:skills",
        },
        "drafts": {"validation": 2, "alternatives": 5, "recipe": 2},
        "build_seconds": 3.0,
        "bank_cases": {"starting": 10, "both": 17},
        "rows": [
            {
                "bank": "starting",
                "full": 2,
                "changed": 0,
                "wins": 0,
                "losses": 0,
                "p": 1.0,
                "wins_on_failed": 0,
                "p_on_failed": 1.0,
            },
            {
                "bank": "both",
                "full": 3,
                "changed": 2,
                "wins": 1,
                "losses": 0,
                "p": 1.0,
                "wins_on_failed": 1,
                "p_on_failed": 1.0,
            },
        ],  # fmt: skip
        "policy_failed": [1, 3],
    }
    text = report(results)
    assert "| both | 17 | 3/4 | 2 | 1 / 0 |" in text
    assert "it failed 2 of the 4 goals" in text
    assert "the 3 training goals the recipe's run draws" in text
