"""``skillrl skills import --dry-run``: the whole file checked, the plan shown, not a byte written.

The plan is the import's own: its checks on every record (not only up to the first bad one) and
the bank's merge decisions; so a dry run of a clean file says exactly what the import then does.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from bank_samples import GENERAL, SIZE_NOTE
from click.testing import CliRunner

from cli import main
from memory import BankConfig, SkillBank, jsonl_format


@pytest.fixture(scope="module")
def template(tmp_path_factory, embedder):
    workspace = tmp_path_factory.mktemp("template") / "ws"
    with SkillBank.open(BankConfig(workspace=workspace), embedder=embedder) as bank:
        general = bank.add(GENERAL).entry
        bank.add(SIZE_NOTE)
    return workspace, general.id


@pytest.fixture
def bank_copy(template, tmp_path):
    source, general_id = template
    workspace = tmp_path / "ws"
    shutil.copytree(source, workspace)
    return workspace, general_id


def file_hashes(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (the SQLite bank and the Chroma index) by its SHA-256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def skillrl_file(tmp_path: Path, *, bad: bool) -> Path:
    """A SkillRL bank: a near-copy of a stored entry, a new skill twice, and bad records."""
    data = {
        "general_skills": [
            {"skill_id": "gen_001", "title": GENERAL.title, "principle": GENERAL.principle},
            {
                "skill_id": "gen_002",
                "title": "Compare prices",
                "principle": "Open two products and buy the cheaper one that fits the task.",
            },
            {
                "skill_id": "gen_003",
                "title": "Compare prices",
                "principle": "Open two products and buy the cheaper one that fits the task.",
            },
        ],  # fmt: skip
        "common_mistakes": [],
    }
    if bad:
        data["general_skills"].append({"skill_id": "gen_004", "title": "", "principle": "x"})
        data["common_mistakes"].append({"mistake_id": "err_001", "description": "Bought early"})
    path = tmp_path / "bank.json"
    path.write_text(json.dumps(data))
    return path


def dry_run(workspace: Path, path: Path, *extra: str):
    return CliRunner().invoke(
        main,
        ["skills", "import", str(path), "--dry-run", "--workspace", str(workspace), *extra],
        env={"COLUMNS": "250"},  # table cells on one line each
    )


def test_a_dry_run_lists_every_record_and_writes_nothing(bank_copy, tmp_path):
    workspace, general_id = bank_copy
    path = skillrl_file(tmp_path, bad=True)
    before = file_hashes(workspace)
    result = dry_run(workspace, path, "--json")
    assert result.exit_code == 1  # a refused record: the import would refuse the whole file
    assert file_hashes(workspace) == before  # the bank and its index, byte for byte
    plan = json.loads(result.stdout)["records"]
    assert [(r["where"], r["outcome"]) for r in plan] == [
        ("$.general_skills[0]", "merge"),
        ("$.general_skills[1]", "add"),
        ("$.general_skills[2]", "merge"),
        ("$.general_skills[3]", "refuse"),
        ("$.common_mistakes[0]", "refuse"),  # found too: the check goes on past a bad record
    ]
    assert plan[0]["into"] == general_id and plan[0]["similarity"] > 0.99
    assert plan[2]["into_record"] == "$.general_skills[1]"
    assert "title" in plan[3]["reason"] and "why_it_happens" in plan[4]["reason"]
    # A refused record shows the title it was written with (a mistake's is its description).
    assert plan[3]["title"] == "" and plan[4]["title"] == "Bought early"
    assert "2 of 5 records" in result.stderr and "would write nothing" in result.stderr


def test_the_table_says_what_would_happen(bank_copy, tmp_path):
    workspace, general_id = bank_copy
    result = dry_run(workspace, skillrl_file(tmp_path, bad=True))
    text = " ".join(result.stdout.split())
    assert "dry run: nothing written" in text
    assert f"into {general_id[:8]}" in text and "into record $.general_skills[1]" in text
    assert "5 records: 1 would be added, 2 merged, 2 refused" in text
    assert "│ $.common_mistakes[0] │ Bought early │ refused │" in text  # the refused row's title


def test_a_clean_dry_run_is_what_the_import_then_does(bank_copy, tmp_path, embedder):
    workspace, general_id = bank_copy
    path = skillrl_file(tmp_path, bad=False)
    planned = dry_run(workspace, path, "--json")
    assert planned.exit_code == 0, planned.output
    outcomes = [r["outcome"] for r in json.loads(planned.stdout)["records"]]
    done = CliRunner().invoke(
        main, ["skills", "import", str(path), "--workspace", str(workspace), "--json"]
    )
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert outcomes.count("add") == len(report["added"]) == 1
    assert outcomes.count("merge") == len(report["merged"]) == 2
    assert report["merged"][0] == general_id


def test_a_jsonl_dry_run_refuses_ids_the_bank_has_and_adds_into_a_new_bank(
    bank_copy, tmp_path, embedder
):
    workspace, _ = bank_copy
    path = tmp_path / "bank.jsonl"
    with SkillBank.open(BankConfig(workspace=workspace), embedder=embedder) as bank:
        jsonl_format.export_jsonl(bank, path)
    path.write_text(path.read_text() + "{not json\n")
    before = file_hashes(workspace)
    again = dry_run(workspace, path, "--json")
    assert again.exit_code == 1 and file_hashes(workspace) == before
    plan = json.loads(again.stdout)["records"]
    assert [r["outcome"] for r in plan] == ["refuse", "refuse", "refuse"]
    assert "already in the bank" in plan[0]["reason"] and "not valid JSON" in plan[2]["reason"]
    assert {r["title"] for r in plan[:2]} == {GENERAL.title, SIZE_NOTE.title}
    assert plan[2]["title"] == ""  # a line that is not JSON has no title to show

    path.write_text("".join(path.read_text().splitlines(keepends=True)[:2]))
    fresh = tmp_path / "fresh"
    result = dry_run(fresh, path, "--json")
    assert result.exit_code == 0, result.output
    assert [r["outcome"] for r in json.loads(result.stdout)["records"]] == ["add", "add"]
    assert not fresh.exists()  # a bank that does not exist yet is not created by looking


def test_a_file_that_is_no_bank_at_all_is_refused_in_one_line(bank_copy, tmp_path):
    workspace, _ = bank_copy
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    before = file_hashes(workspace)
    result = dry_run(workspace, path)
    assert result.exit_code == 1 and "a SkillRL bank is a JSON object" in result.output
    assert file_hashes(workspace) == before


def test_help_explains_the_dry_run():
    text = " ".join(CliRunner().invoke(main, ["skills", "import", "--help"]).output.split())
    assert "--dry-run" in text and "writing nothing" in text


def test_a_bank_opened_read_only_reads_refuses_changes_and_plans_as_add_many(bank_copy, embedder):
    from bank_samples import PRICE_NOTE

    from skillrl_core.errors import BankError

    workspace, general_id = bank_copy
    before = file_hashes(workspace)
    config = BankConfig(workspace=workspace, read_only=True)
    with SkillBank.open(config, embedder=embedder) as bank:
        assert bank.read_only and bank.count() == 2
        plan = bank.plan_many([GENERAL, PRICE_NOTE, PRICE_NOTE])
        with pytest.raises(BankError, match="read-only"):
            bank.add(PRICE_NOTE)
    assert file_hashes(workspace) == before
    assert [(p.entry_id, p.draft) for p in plan] == [(general_id, None), (None, None), (None, 1)]
    with SkillBank.open(BankConfig(workspace=workspace), embedder=embedder) as bank:
        added = bank.add_many([GENERAL, PRICE_NOTE, PRICE_NOTE])
    assert [a.merged for a in added] == [p.merged for p in plan]
    assert added[0].entry.id == general_id and added[2].entry.id == added[1].entry.id
