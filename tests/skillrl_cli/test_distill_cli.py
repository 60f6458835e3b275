from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from distill_episodes import episode

from cli import main
from memory import BankConfig, SkillBank
from memory.types import EntryDraft

pytestmark = pytest.mark.slow


def _run(*args: str) -> dict:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_skillrl_distill_twice_adds_nothing_the_second_time(bank, workspace):
    bank.trajectories.save_episodes(
        [
            episode(success=False, chosen={"size": "medium"}, missed_options=["large"]),
            episode(success=True, chosen={"size": "large", "color": "navy"}),
        ]
    )
    bank.close()
    first = _run("distill", "--json", "--workspace", str(workspace))
    # A note from the failure, a task skill and a case from the success.
    assert first["episodes_distilled"] == 2 and len(first["added"]) == 3
    second = _run("distill", "--json", "--workspace", str(workspace))
    assert (second["episodes_seen"], second["added"], second["merged"]) == (0, [], [])
    result = CliRunner().invoke(main, ["distill", "--workspace", str(workspace)])
    assert "Nothing to distill" in result.output


def test_teacher_without_model_is_a_usage_error(workspace):
    result = CliRunner().invoke(
        main, ["distill", "--distiller", "teacher", "--workspace", str(workspace)]
    )
    assert result.exit_code == 2 and "--teacher-model" in result.output


def test_retired_entry_is_restored_by_skills_revert(bank, workspace):
    from skillrl.distill import upkeep

    draft = EntryDraft(
        kind="general",
        title="Buy the first result",
        principle="Open the first result and buy it at once.",
    )
    entry_id = bank.add(draft, author="test").entry.id
    played = []
    for success in [False] * 8 + [True] * 8:
        ep = episode(success=success, chosen={"size": "large"})
        ep.turns[0].retrieved_ids = [] if success else [entry_id]
        played.append(ep)
    bank.trajectories.save_episodes(played)
    assert entry_id in upkeep(bank).retired
    bank.close()
    shown = _run("skills", "revert", entry_id, "1", "--json", "--workspace", str(workspace))
    assert shown["status"] == "active"


def test_skillrl_bootstrap_plays_distills_and_exports_a_loadable_starting_bank(workspace, tmp_path):
    from skillrl.distill.seeding import load_starting_bank

    out = tmp_path / "starting.json"
    report = _run(
        "bootstrap",
        "--env",
        "webshop",
        "--episodes",
        "10",
        "--probe-fraction",
        "0.5",
        "--export",
        str(out),
        "--json",
        "--workspace",
        str(workspace),
    )
    assert report["episodes"] == 10 and report["probes"] == 5
    assert report["distill"]["episodes_distilled"] == 10 and report["distill"]["added"]
    env, drafts = load_starting_bank(out)
    assert env == "webshop" and {d.kind for d in drafts} >= {"task", "mistake"}
    # The starting bank holds the skills and notes; the cases ship in a file of their own.
    with SkillBank.open(BankConfig(workspace=workspace)) as bank:
        added = bank.entries(report["distill"]["added"])
        cases = sum(entry.kind == "case" for entry in added.values())
    assert cases > 0 and "case" not in {d.kind for d in drafts}
    assert len(drafts) == len(report["distill"]["added"]) - len(report["retired"]) - cases


def test_bootstrap_refuses_an_unknown_env_in_one_line(workspace):
    result = CliRunner().invoke(
        main, ["bootstrap", "--env", "alfworld", "--workspace", str(workspace)]
    )
    assert result.exit_code == 1 and "unknown environment 'alfworld'" in result.output
