"""Writes that must not happen: read commands, files that are not a bank, a disagreeing index.

Every check fingerprints the workspace's files (the SQLite file with its ``-wal`` and ``-shm``,
and the Chroma folder) before and after: a read command, and a refusal, leave every byte as it
was, and create no file.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
from test_skills_cli import cli_bank, run, template_bank  # noqa: F401 - fixtures

from memory import BankConfig, SkillBank


def fingerprint(workspace: Path) -> dict[str, str]:
    """Every file under ``workspace`` (SQLite's -wal and -shm included) by its content hash."""
    if not workspace.exists():
        return {}
    return {
        str(path.relative_to(workspace)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(workspace.rglob("*"))
        if path.is_file()
    }


def one_line_failure(result, *names: str) -> str:
    """The single error line of a refused command, which names each of ``names``."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


READ_COMMANDS = [
    ("list",),
    ("list", "--status", "all", "--sort", "usage"),
    ("show", "{id}"),
    ("show", "{id}", "--json"),
    ("history", "{id}"),
    ("search", "pick the right size of shoes"),
    ("stats",),
    ("snapshots",),
    ("diff", "before", "before"),
]


@pytest.mark.parametrize("args", READ_COMMANDS, ids=" ".join)
def test_a_read_command_writes_nothing(cli_bank, args):  # noqa: F811
    workspace, size_id = cli_bank
    before = fingerprint(workspace)
    result = run(workspace, *[a.format(id=size_id) for a in args])
    assert result.exit_code == 0, result.output
    assert fingerprint(workspace) == before


def test_a_read_command_on_a_workspace_without_a_bank_creates_nothing(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    result = run(workspace, "list")
    assert result.exit_code == 0, result.output
    assert fingerprint(workspace) == {}


def _zero_bytes(path: Path) -> None:
    path.write_bytes(b"")


def _random_bytes(path: Path) -> None:
    path.write_bytes(os.urandom(8192))


def _foreign_sqlite(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    connection.execute("INSERT INTO notes (body) VALUES ('not a skill bank')")
    connection.commit()
    connection.close()


def _foreign_sqlite_with_entries(path: Path) -> None:
    """Another program's database that happens to have a table named like the bank's."""
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE entries (id INTEGER PRIMARY KEY, body TEXT)")
    connection.commit()
    connection.close()


def _foreign_alembic_database(path: Path) -> None:
    """Another alembic-managed program's database, with an 'entries' table too."""
    _foreign_sqlite_with_entries(path)
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
    connection.execute("INSERT INTO alembic_version VALUES ('ae1027a6acf')")
    connection.commit()
    connection.close()


NOT_A_BANK = {
    "empty": (_zero_bytes, "empty file (0 bytes)"),
    "random": (_random_bytes, "not an SQLite database"),
    "foreign": (_foreign_sqlite, "not a skillrl skill bank"),
    # Both were told to run `skills reindex`, which migrated (wrote) them and then failed.
    "foreign-entries": (_foreign_sqlite_with_entries, "no 'alembic_version' table"),
    "foreign-alembic": (_foreign_alembic_database, "schema revision ae1027a6acf is none of"),
}


ADD = ("add", "--kind", "general", "--title", "t", "--principle", "p")


@pytest.mark.parametrize("command", [("list",), ("search", "shoes"), ADD, ("reindex",)], ids=str)
@pytest.mark.parametrize("kind", sorted(NOT_A_BANK))
def test_a_file_that_is_not_a_bank_is_refused_untouched(tmp_path, kind, command):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    make, message = NOT_A_BANK[kind]
    make(workspace / "bank.sqlite")
    before = fingerprint(workspace)
    one_line_failure(run(workspace, *command), "bank.sqlite", message)
    assert fingerprint(workspace) == before  # no schema, no WAL switch, no index folder


def test_a_truncated_bank_is_refused_untouched(cli_bank):  # noqa: F811
    workspace, _ = cli_bank
    database = workspace / "bank.sqlite"
    database.write_bytes(database.read_bytes()[: database.stat().st_size // 2])
    before = fingerprint(workspace)
    one_line_failure(run(workspace, "list"), "bank.sqlite", "truncated")
    one_line_failure(run(workspace, "retire", "0" * 32), "bank.sqlite", "truncated")
    assert fingerprint(workspace) == before


def test_a_damaged_page_is_one_line_not_a_traceback(cli_bank):  # noqa: F811
    workspace, _ = cli_bank
    database = workspace / "bank.sqlite"
    data = bytearray(database.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page : len(data)] = os.urandom(len(data) - page)  # every page but the first
    database.write_bytes(bytes(data))
    result = run(workspace, "list")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "bank" in result.output and len(result.output.strip().splitlines()) == 1


def test_an_index_path_that_is_a_file_is_refused_untouched(cli_bank):  # noqa: F811
    import shutil

    workspace, _ = cli_bank
    shutil.rmtree(workspace / "chroma")
    (workspace / "chroma").write_text("not a folder")
    before = fingerprint(workspace)
    for command in (("list",), ("add", "--kind", "general", "--title", "t", "--principle", "p")):
        one_line_failure(run(workspace, *command), "chroma", "is a file")
    assert fingerprint(workspace) == before


def test_a_disagreeing_index_is_reported_and_repaired_only_when_asked(cli_bank, embedder):  # noqa: F811
    workspace, size_id = cli_bank
    config = BankConfig(workspace=workspace)
    with SkillBank.open(config, embedder=embedder, verify=False) as bank:
        bank.store.index.delete([size_id])
    before = fingerprint(workspace)
    listed = run(workspace, "list")
    assert listed.exit_code == 0, listed.output
    assert "1 missing" in listed.output and "skillrl skills reindex" in listed.output
    assert fingerprint(workspace) == before
    assert run(workspace, "reindex").exit_code == 0
    with SkillBank.open(config, embedder=embedder, verify=False) as bank:
        assert bank.check().ok


def test_measure_refuses_the_test_split_before_opening_the_bank(tmp_path):
    workspace = tmp_path / "ws"
    result = run(workspace, "measure", "--split", "test", "--model", "expert")
    line = one_line_failure(result, "--split 'test'")
    assert "held-out goals" in line
    assert not workspace.exists()


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (("--goals", "0"), ("--goals",)),
        (("--goals", "5-2"), ("--goals",)),
        (("--entry", "   "), ("--entry",)),
        (("--entry", "x" * 40), ("--entry",)),
    ],
    ids=lambda v: " ".join(v)[:30],
)
def test_measure_checks_goals_and_entries_before_opening_the_bank(tmp_path, args, names):
    workspace = tmp_path / "ws"
    one_line_failure(run(workspace, "measure", *args), *names)
    assert not workspace.exists()


def test_paired_utility_refuses_to_record_test_goals():
    from skillrl.distill.paired_utility import PairedUtilityConfig, measure_paired_utility
    from skillrl.rollout import EpisodeStart
    from skillrl_core.errors import ConfigError

    class Agent:
        uses_skills = True
        name = "fake"

    starts = [EpisodeStart("webshop", "test", goal_index=0, seed=0)]
    with pytest.raises(ConfigError, match="held-out goals"):
        measure_paired_utility(Agent(), object(), starts, PairedUtilityConfig())  # type: ignore[arg-type]


REFUSED_WRITES = [
    ("revert", "{id}", "999"),
    ("retire", "nosuch"),
    ("restore", "nosuch"),
    ("edit", "nosuch", "--title", "t"),
    ("edit", "{id}", "--title", ""),
    ("rm", "nosuch", "--yes"),
    ("import", "{missing}"),
]


@pytest.mark.parametrize("args", REFUSED_WRITES, ids=" ".join)
def test_a_refused_write_leaves_every_byte_of_the_bank_and_its_index(cli_bank, args):  # noqa: F811
    workspace, size_id = cli_bank
    missing = str(workspace.parent / "no-such-file.jsonl")
    before = fingerprint(workspace)
    result = run(workspace, *[a.format(id=size_id, missing=missing) for a in args])
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    assert fingerprint(workspace) == before  # chroma/chroma.sqlite3 and its segments too


def test_an_accepted_write_still_reaches_the_index(cli_bank, embedder):  # noqa: F811
    workspace, size_id = cli_bank
    result = run(workspace, "edit", size_id, "--title", "Pick the size the goal asks for")
    assert result.exit_code == 0, result.output
    with SkillBank.open(BankConfig(workspace=workspace, read_only=True), embedder=embedder) as bank:
        revisions = {r.id: r.metadata["revision"] for r in bank.store.index.get()}
        entry = bank.get(size_id)
        assert revisions[size_id] == entry.revision and entry.title.endswith("asks for")
