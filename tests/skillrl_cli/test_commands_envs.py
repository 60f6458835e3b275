"""Every environment through the real CLI: run (expert, person, model), eval, train, skills."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trainers"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs"))


def invoke(*args: str, stdin: str | None = None):
    return CliRunner().invoke(main, list(args), input=stdin, catch_exceptions=False)


@pytest.mark.parametrize(
    ("env_id", "last_action"),
    [("webshop", "click[buy now]"), ("sokoban", None), ("counter", "add")],
)
def test_the_expert_plays_every_environment_from_the_cli(workspace, env_id, last_action):
    import toy_env

    importlib.reload(toy_env)  # registers the documented "counter" in this test's registry

    result = invoke("run", "--env", env_id, "--policy", "expert", "--episodes", "3", "--no-record",
                    "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["summary"]["successes"] == 3 and data["summary"]["mean_score"] == 1.0
    if last_action is not None:
        assert data["episodes"][0]["steps"][-1]["action"] == last_action


def test_the_docs_toy_environment_is_played_from_the_cli_by_its_module_reference(workspace):
    # Nothing imports toy_env first: --env names its SPEC, as a user names their own module.
    result = invoke("run", "--env", "toy_env:SPEC", "--policy", "expert", "--goals", "0-4",
                    "--no-record", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    episodes = json.loads(result.stdout)["episodes"]
    assert [len(e["steps"]) for e in episodes] == [1, 2, 3, 4, 5]  # targets 1..5, one add a turn
    assert all(e["success"] and e["steps"][-1]["action"] == "add" for e in episodes)
    listed = {row["id"]: row["source"] for row in json.loads(invoke("envs", "--json").stdout)}
    assert listed["toy_env:SPEC"] == "toy_env:SPEC"  # where it came from: the reference
    assert listed["sokoban"] == "built-in (envs.sokoban.spec)"


def test_an_environment_reference_that_fails_to_import_is_one_line_naming_it(workspace):
    result = CliRunner().invoke(main, ["run", "--env", "no_such_package_xyz:SPEC", "--policy",
                                       "expert", "--no-record"])  # fmt: skip
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert "environment 'no_such_package_xyz:SPEC': importing" in line


def test_sokoban_difficulties_interleave_and_every_turn_explains_its_reward(workspace):
    result = invoke("run", "--env", "sokoban", "--policy", "expert", "--episodes", "3",
                    "--no-record", "--json")  # fmt: skip
    episodes = json.loads(result.stdout)["episodes"]
    assert [e["category"] for e in episodes] == ["6x6-1box", "7x7-2box", "8x8-3box"]
    assert all(e["reward_breakdown"]["solved"] for e in episodes)


def test_a_person_plays_sokoban_with_moves_numbers_and_initials(workspace):
    # Room 6x6-1box-0000: the player at (1,1), the box at (2,2), the target at (4,4).
    result = invoke("run", "--env", "sokoban", "--policy", "human", "--no-skills", "--no-record",
                    "--max-turns", "4", "--json", stdin="right\n2\nl\njump\n")  # fmt: skip
    assert result.exit_code == 0, result.output
    steps = json.loads(result.stdout)["episodes"][0]["steps"]
    assert [s["action"] for s in steps] == ["right", "down", "left", "jump"]
    assert [s["valid"] for s in steps] == [True, True, True, False]
    assert "type a move (up, down, left, right)" in result.stderr


@pytest.mark.slow
def test_sokoban_trains_evaluates_and_uses_skills_with_a_tiny_model(tmp_path):
    from tiny_checkpoint import write_tiny_checkpoint

    model = str(write_tiny_checkpoint(tmp_path / "model"))
    ws = str(tmp_path / "ws")
    common = ["--workspace", ws, "--model", model, "--max-turns", "2", "--threads", "1"]
    trained = invoke("train", "--env", "sokoban", "--cycles", "1", "--no-skills",
                     "--goals-per-cycle", "1", "--group-size", "2", "--eval-goals", "1",
                     "--max-new-tokens", "4", *common)  # fmt: skip
    assert trained.exit_code == 0, trained.output
    rows = [json.loads(line) for line in (Path(ws) / "runs/sokoban/metrics.jsonl").open()]
    assert rows[-1]["train.episodes"] >= 2 and rows[-1]["eval.episodes"] == 1
    assert 0.0 <= rows[-1]["train.mean_score"] <= 1.0

    evaluated = invoke("eval", "--env", "sokoban", "--skills", "off", "--goals", "3",
                       "--samples", "1", "--k", "1", "--t", "1", "--max-new-tokens", "4", "--json",
                       *common)  # fmt: skip
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(evaluated.stdout)["arms"][0]["greedy"]["episodes"] == 3

    added = invoke("skills", "add", "--workspace", ws, "--kind", "task", "--env", "sokoban",
                   "--category", "6x6-1box", "--title", "Push toward the target",
                   "--principle", "Stand behind the box, then push it straight at the target.",
                   "--json")  # fmt: skip
    assert added.exit_code == 0, added.output
    found = invoke("skills", "search", "Push every box onto a target.", "--env", "sokoban",
                   "--category", "6x6-1box", "--workspace", ws, "--json")  # fmt: skip
    assert [e["title"] for e in json.loads(found.stdout)["task"]] == ["Push toward the target"]
    # The tiny checkpoint's tokenizer has no merges (a token per character), so its Sokoban
    # prompt is several times SmolLM2's (about 190 tokens): give it room for the skill.
    played = invoke("run", "--env", "sokoban", "--no-record", "--no-seed-bank", "--json",
                    "--max-prompt-tokens", "4000", *common)  # fmt: skip
    assert played.exit_code == 0, played.output
    steps = json.loads(played.stdout)["episodes"][0]["steps"]
    assert all(s["action"] in ("up", "down", "left", "right") and s["valid"] for s in steps)
    assert all(s["retrieved_ids"] for s in steps)  # the skill reached the prompt every turn


def test_a_module_in_the_folder_the_command_runs_in_is_found_by_its_reference(
    workspace, tmp_path, monkeypatch
):
    folder = tmp_path / "mine"
    folder.mkdir()
    toy = Path(__file__).resolve().parents[1] / "envs" / "toy_env.py"
    (folder / "my_counter_env.py").write_text(toy.read_text())
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(folder))])
    result = invoke("run", "--env", "my_counter_env:SPEC", "--policy", "expert", "--no-record",
                    "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["successes"] == 1
    assert sys.path[-1] == str(folder)  # after every installed package: it shadows none
