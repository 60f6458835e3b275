"""``skillrl skills``: the real entry point on a real bank; bad input never changes the bank."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from bank_samples import GENERAL, SIZE_NOTE
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from cli import main
from memory import BankConfig, SkillBank


@pytest.fixture(scope="module")
def template_bank(tmp_path_factory, embedder):
    """A workspace holding two entries (one edited) and a snapshot, built once per module."""
    workspace = tmp_path_factory.mktemp("template") / "ws"
    with SkillBank.open(BankConfig(workspace=workspace), embedder=embedder) as bank:
        size = bank.add(SIZE_NOTE).entry
        bank.add(GENERAL)
        bank.edit(size.id, author="bob", title="Choose the right size")
        bank.snapshots.create("before")
    return workspace, size.id


@pytest.fixture
def cli_bank(template_bank, tmp_path: Path):
    """A private copy of the template workspace (copying files is much faster than building)."""
    source, size_id = template_bank
    workspace = tmp_path / "ws"
    shutil.copytree(source, workspace)
    return workspace, size_id


def run(workspace: Path, *args: str, input: str | None = None):
    result = CliRunner().invoke(main, ["skills", *args, "--workspace", str(workspace)], input=input)
    return result


def bank_state(workspace: Path, embedder) -> dict:
    with SkillBank.open(BankConfig(workspace=workspace), embedder=embedder) as bank:
        entries = bank.list(status=None)
        return {
            "entries": [dataclasses.asdict(e) for e in entries],
            "history": {e.id: [dataclasses.asdict(r) for r in bank.history(e.id)] for e in entries},
            "snapshots": [s.name for s in bank.snapshots.list()],
            "index": sorted((r.id, r.metadata["revision"]) for r in bank.store.index.get()),
        }


def test_commands_work_end_to_end(cli_bank, tmp_path):
    workspace, size_id = cli_bank
    listed = json.loads(run(workspace, "list", "--json").stdout)
    assert {e["title"] for e in listed} == {"Choose the right size", "Re-read the instruction "
                                            "before buying"}  # fmt: skip
    shown = json.loads(run(workspace, "show", size_id[:8], "--json").stdout)
    assert shown["id"] == size_id and [r["revision"] for r in shown["revisions"]] == [1, 2]
    found = json.loads(run(workspace, "search", "running shoes in size 9", "--category",
                           "footwear", "--json").stdout)  # fmt: skip
    assert found["task"][0]["id"] == size_id
    added = run(
        workspace, "add", "--kind", "task", "--env", "webshop", "--category", "apparel",
        "--title", "Pick the colour", "--principle", "Click the colour asked for.", "--json",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    new_id = json.loads(added.output)["id"]
    assert run(workspace, "retire", new_id, "--reason", "dup").exit_code == 0
    assert run(workspace, "restore", new_id).exit_code == 0
    assert run(workspace, "revert", size_id, "1").exit_code == 0
    history = json.loads(run(workspace, "history", size_id, "--json").stdout)
    assert [r["data"]["title"] for r in history][-1] == "Pick the shoe size the customer asked for"
    diff = json.loads(run(workspace, "diff", "before", "--json").stdout)
    assert [e["id"] for e in diff["added"]] == [new_id] and diff["changed"][0][
        "entry_id"
    ] == size_id
    out = tmp_path / "bank.jsonl"
    assert run(workspace, "export", str(out)).exit_code == 0
    assert len(out.read_text().splitlines()) == 3
    assert run(workspace, "rm", new_id, "--yes").exit_code == 0
    stats = json.loads(run(workspace, "stats", "--json").stdout)
    assert stats["entries"]["task"] == {"active": 1} and stats["index"]["ok"]
    assert json.loads(run(workspace, "reindex", "--json").stdout)["indexed"] == 2
    assert run(workspace, "snapshot", "after").exit_code == 0
    assert [s["name"] for s in json.loads(run(workspace, "snapshots", "--json").stdout)] == [
        "before", "after"]  # fmt: skip
    table = run(workspace, "list")
    assert table.exit_code == 0 and "Choose" not in table.output and "Pick the" in table.output


def test_edit_in_editor_is_validated_before_saving(cli_bank, monkeypatch, embedder):
    workspace, size_id = cli_bank
    monkeypatch.setattr(
        "click.edit", lambda text: text.replace("Choose the right size", "Mind size")
    )
    assert run(workspace, "edit", size_id).exit_code == 0
    before = bank_state(workspace, embedder)
    assert before["entries"][0]["title"] == "Mind size"
    for bad in ("principle: ''\n", "title: [unclosed\n", "- a list\n", "support_count: 3\n"):
        monkeypatch.setattr("click.edit", lambda text, bad=bad: bad)
        result = run(workspace, "edit", size_id)
        assert result.exit_code != 0 and "Error" in result.output, bad
    assert bank_state(workspace, embedder) == before


BAD_COMMANDS = [
    (("show", "0" * 32), "no skill-bank entry"),
    (("history", "missing-id"), "no skill-bank entry"),
    (("retire", "0" * 32), "no skill-bank entry"),
    (("restore", "0" * 32), "no skill-bank entry"),
    (("rm", "0" * 32, "--yes"), "no skill-bank entry"),
    (("revert", "{id}", "99"), "no revision 99"),
    (("revert", "{id}", "two"), "not a valid integer"),
    (("revert", "{id}", "-1"), "-1 is not in the range x>=1"),
    (("search", ""), "the query text is empty"),
    (("search", "  "), "the query text is empty"),
    (("edit", "0" * 32, "--title", "x"), "no skill-bank entry"),
    (("edit", "{id}", "--principle", " "), "principle must not be empty"),
    (("edit", "{id}", "--category", ""), "needs both env and category"),
    (("add", "--kind", "task", "--title", "t", "--principle", "p"), "needs both env and category"),
    (("add", "--kind", "general", "--title", "", "--principle", "p"), "title must not be empty"),
    (("add", "--kind", "skill", "--title", "t", "--principle", "p"), "Invalid value"),
    (("import", "{missing}"), "cannot read"),
    (("import", "{badjson}", "--format", "skillrl"), "not valid JSON"),
    (("import", "{badjsonl}"), "bad.jsonl:1"),
    (("export", "{dir}"), "directory"),
    (("diff", "before", "nope"), "no snapshot"),
    (("snapshot", "bad name!"), "snapshot name"),
    (("snapshot", "before"), "already exists"),
    (("search", "shoes", "--k-task", "-1"), "k_task"),
    (("list", "--sort", "random"), "Invalid value"),
    (("stats", "--database-url", "nosuchdb://x"), "database_url"),
    (("reindex", "--chroma-url", "ftp://x"), "chroma_url"),
]


@pytest.mark.parametrize(("args", "message"), BAD_COMMANDS, ids=lambda v: " ".join(v)[:30]
                         if isinstance(v, tuple) else None)  # fmt: skip
def test_bad_input_fails_clearly_and_leaves_the_bank_unchanged(
    cli_bank, tmp_path, embedder, args, message
):
    workspace, size_id = cli_bank
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "bad.jsonl").write_text('{"id": "x"}\n')
    (tmp_path / "adir").mkdir()
    values = {"id": size_id, "missing": str(tmp_path / "missing.json"),
              "badjson": str(tmp_path / "bad.json"), "badjsonl": str(tmp_path / "bad.jsonl"),
              "dir": str(tmp_path / "adir")}  # fmt: skip
    before = bank_state(workspace, embedder)
    result = run(workspace, *[a.format(**values) for a in args])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output
    assert bank_state(workspace, embedder) == before


def test_every_command_has_help():
    from skillrl_cli.skills import skills

    for name, command in skills.commands.items():
        result = CliRunner().invoke(main, ["skills", name, "--help"])
        assert result.exit_code == 0 and "--workspace" in result.output, name
        for param in command.params:
            if isinstance(param, __import__("click").Option):
                assert param.help, f"{name} {param.name} has no help"


def test_list_fits_an_80_column_terminal_without_splitting_titles_word_by_word(cli_bank):
    workspace, _ = cli_bank
    title = "Zebra-check the whole instruction before clicking buy now on any product page"
    added = run(workspace, "add", "--kind", "general", "--title", title, "--principle", "Check.")
    assert added.exit_code == 0, added.output
    result = CliRunner(env={"COLUMNS": "80"}).invoke(
        main, ["skills", "list", "--workspace", str(workspace)]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if " title " in line).split("┃")
    column = [c.strip() for c in header].index("title")
    rows = [line.split("│") for line in lines if "│" in line]
    start = next(i for i, r in enumerate(rows) if r[column].strip().startswith("Zebra"))
    end = next((i for i in range(start + 1, len(rows)) if rows[i][0].strip()), len(rows))
    cells = [r[column].strip() for r in rows[start:end]]
    assert " ".join(cells).rstrip("…") in title
    # Before: 11 lines of one word each; now a few lines of several words.
    assert len(cells) <= len(title.split()) // 2
    assert sum(len(c.split()) >= 2 for c in cells) >= len(cells) - 1


@given(
    natural=st.lists(st.integers(1, 200), min_size=1, max_size=5),
    available=st.integers(0, 300),
    data=st.data(),
)
def test_fitted_widths_never_exceed_what_columns_need_or_what_is_available(
    natural, available, data
):
    from skillrl_cli.skills_view import fit_widths

    n = len(natural)
    shares = data.draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    minimum = data.draw(st.lists(st.integers(1, 20), min_size=n, max_size=n))
    widths = fit_widths(natural, shares, minimum, available)
    floor = [min(a, b) for a, b in zip(natural, minimum, strict=True)]
    assert all(f <= w <= max(a, f) for w, a, f in zip(widths, natural, floor, strict=True))
    if sum(floor) <= available:
        assert sum(widths) <= available
    if sum(natural) <= available:
        assert widths == natural


def test_search_without_a_category_finds_task_skills_of_every_category(cli_bank):
    workspace, size_id = cli_bank
    result = run(workspace, "search", "what shoe size should I pick", "--json")
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in json.loads(result.stdout)["task"]] == [size_id]
    other = run(workspace, "search", "what shoe size should I pick", "--category", "apparel",
                "--json")  # fmt: skip
    assert json.loads(other.stdout)["task"] == []


def test_a_case_is_added_with_its_offers_and_shown_with_them(cli_bank):
    workspace, _ = cli_bank
    added = run(
        workspace, "add", "--kind", "case", "--title", "A request like this was solved by "
        "click[b0tea00001]", "--principle", "Solved by: click[b0tea00001], click[buy now]",
        "--when-to-apply", "i need organic herbal tea", "--env", "webshop", "--category",
        "grocery", "--offers", "Ginger | 40 count", "--json",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    entry_id = json.loads(added.stdout)["id"]
    shown = run(workspace, "show", entry_id)
    assert "offers" in shown.stdout and "Ginger | 40 count" in shown.stdout
    refused = run(workspace, "add", "--kind", "general", "--title", "t", "--principle", "p",
                  "--offers", "red")  # fmt: skip
    assert refused.exit_code != 0 and "offers is for cases only" in refused.output


def test_search_shows_the_case_a_turn_would_get_asked_with_the_options_the_text_names(cli_bank):
    workspace, _ = cli_bank
    for product, request, offers in (
        ("b0shoe0001", "i want men's running shoes which are non slip and arch support", "blue"),
        ("b0shoe0002", "i want men's running shoes which are arch support and breathable", "red"),
    ):
        added = run(
            workspace, "add", "--kind", "case", "--title", "A request like this was solved by "
            f"click[{product}]", "--principle", f"Solved by: click[{product}]", "--when-to-apply",
            request, "--env", "webshop", "--category", "fashion", "--offers", offers,
        )  # fmt: skip
        assert added.exit_code == 0, added.output
    text = "i want men's running shoes which are non slip and arch support with color: red"
    wide = run(workspace, "search", text, "--case-fit-margin", "1", "--json")
    found = json.loads(wide.stdout)
    assert found["wants"] == ["red"]
    assert [c["title"][-11:-1] for c in found["cases"]] == ["b0shoe0002"]
    nearest = json.loads(run(workspace, "search", text, "--case-fit-margin", "0", "--json").stdout)
    assert [c["title"][-11:-1] for c in nearest["cases"]] == ["b0shoe0001"]
    table = run(workspace, "search", text, "--case-fit-margin", "1")
    assert "cases" in table.stdout and "b0shoe0002" in table.stdout
    refused = run(workspace, "search", text, "--case-fit-margin", "3")
    assert refused.exit_code != 0 and "case_fit_margin" in refused.output
