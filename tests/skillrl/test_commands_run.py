"""``skillrl run`` through click's runner and as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cli import main


def run_cli(*args: str):
    return CliRunner().invoke(main, ["run", *args], catch_exceptions=False)


def test_expert_plays_and_json_reports_every_episode(workspace):
    result = run_cli("--policy", "expert", "--episodes", "2", "--no-record", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["summary"] == {
        "episodes": 2,
        "successes": 2,
        "success_rate": 1.0,
        "mean_score": 1.0,
    }
    first = data["episodes"][0]
    assert first["split"] == "test" and first["agent"] == "expert" and first["success"]
    assert first["steps"][-1]["action"] == "click[buy now]" and first["steps"][-1]["reward"] == 1.0
    assert data["stats"]["turns"] == sum(e["turns"] for e in data["episodes"])


def test_rich_output_shows_turns_and_summary(workspace):
    result = run_cli("--policy", "expert", "--goal", "3", "--no-record")
    assert result.exit_code == 0, result.output
    assert "episode 1 · turn 1" in result.output and "action: search[" in result.output
    assert "summary" in result.output and "1/1" in result.output


def test_step_mode_lets_a_person_override_the_action(workspace):
    result = CliRunner().invoke(
        main,
        ["run", "--policy", "expert", "--step", "--no-record", "--max-turns", "2", "--json"],
        input="search[zzz qqq]\n\n",
    )
    assert result.exit_code == 0, result.output
    steps = json.loads(result.stdout)["episodes"][0]["steps"]
    assert steps[0]["action"] == "search[zzz qqq]" and "overridden" in steps[0]["model_output"]
    assert steps[0]["substituted"] and not steps[1]["substituted"]
    assert len(steps) == 2  # the turn limit ends it


def test_bad_options_fail_with_a_clear_message(workspace):
    result = CliRunner().invoke(main, ["run", "--env", "nope", "--policy", "expert", "--no-record"])
    assert result.exit_code == 1 and "unknown environment 'nope'" in result.output
    result = CliRunner().invoke(main, ["run", "--backend", "openai", "--no-skills", "--no-record"])
    assert result.exit_code == 1 and "base_url is required" in result.output


def test_every_option_has_help():
    result = CliRunner().invoke(main, ["run", "--help"])
    for option in (
        "--episodes",
        "--split",
        "--goal",
        "--seed",
        "--model",
        "--backend",
        "--base-url",
        "--no-skills",
        "--constrained",
        "--max-turns",
        "--step",
        "--json",
        "--workspace",
        "--policy",
        "--no-seed-bank",
    ):
        assert option in result.output


@pytest.mark.slow
def test_subprocess_expert_run_records_into_a_seeded_bank(workspace):
    env = {**os.environ, "SKILLRL_WORKSPACE": str(workspace), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "cli", "run", "--policy", "expert", "--episodes", "2", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["successes"] == 2
    assert "seeded the empty skill bank" in done.stderr
    from memory import BankConfig, SkillBank

    with SkillBank.open(BankConfig(workspace=workspace)) as bank:
        assert len(bank.episodes(env="webshop")) == 2 and bank.count() > 0


def test_a_person_plays_with_typed_shorthand(workspace):
    result = CliRunner().invoke(
        main,
        ["run", "--policy", "human", "--no-skills", "--no-record", "--max-turns", "2", "--json"],
        input="herbal tea\n3\n",
    )
    assert result.exit_code == 0, result.output
    steps = json.loads(result.stdout)["episodes"][0]["steps"]
    assert [s["action"] for s in steps][0] == "search[herbal tea]"
    assert steps[1]["action"].startswith("click[") and steps[1]["valid"]
    assert steps[0]["model_output"] == "herbal tea"
