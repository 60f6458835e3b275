"""``skillrl eval --skills on,placebo,off``: arms on the same goals, compared goal by goal; and a
held-out goal leaves the bank as it was, byte for byte."""

from __future__ import annotations

import json
import os
import sys

import pytest
from click.testing import CliRunner
from test_bank_untouched import fingerprint

from cli import main

pytestmark = pytest.mark.slow


@pytest.fixture
def tiny_model(tmp_path):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "trainers"))
    from tiny_checkpoint import write_tiny_checkpoint

    return str(write_tiny_checkpoint(tmp_path / "tiny"))


def invoke(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_the_arms_play_the_same_goals_and_are_compared_goal_by_goal(workspace, tiny_model):
    common = ["--model", tiny_model, "--max-turns", "2", "--max-new-tokens", "4", "--threads",
              "1", "--t", "2", "--max-prompt-tokens", "900"]  # fmt: skip
    result = invoke("eval", "--goals", "0-2", "--skills", "on,placebo,off", "--json", *common)
    payload = json.loads(result.stdout)
    arms = payload["arms"]
    assert [a["arm"] for a in arms] == ["on", "placebo", "off"]
    goals = [[(o["goal_index"], o["goal_id"]) for o in a["outcomes"]] for a in arms]
    assert goals[0] == goals[1] == goals[2] and [g for g, _ in goals[0]] == [0, 1, 2]
    comparisons = payload["comparisons"]
    assert [(c["baseline"], c["other"]) for c in comparisons] == [("on", "placebo"), ("on", "off")]
    for c, arm in zip(comparisons, arms[1:], strict=True):
        assert c["other_successes"] == sum(o["success"] for o in arm["outcomes"])
        assert 0.0 <= c["p_value"] <= 1.0


def test_an_unknown_arm_is_a_usage_error_naming_it(workspace):
    result = CliRunner().invoke(main, ["eval", "--skills", "on,plaecbo"])
    assert result.exit_code == 2
    assert "Invalid value for '--skills': 'plaecbo' is not one of" in result.output


def test_playing_test_goals_leaves_every_bank_table_and_counter_as_it_was(workspace, tiny_model):
    # A training episode seeds the bank and records one trajectory: what test goals must not do.
    invoke("run", "--policy", "expert", "--split", "train", "--goals", "0-0", "--max-turns", "3")
    before = fingerprint(workspace)
    assert any(name.endswith("bank.sqlite") for name in before)
    common = ["--model", tiny_model, "--max-turns", "2", "--threads", "1", "--max-prompt-tokens",
              "900"]  # fmt: skip
    invoke("run", "--goals", "0-1", "--skills", *common)
    invoke("eval", "--goals", "0-1", "--skills", "all", "--t", "2", "--max-new-tokens", "4",
           *common)  # fmt: skip
    assert fingerprint(workspace) == before
