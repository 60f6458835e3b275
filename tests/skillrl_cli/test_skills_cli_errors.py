"""``skillrl skills``: each way a command can fail prints one line, exits 1, changes nothing."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_skills_cli import bank_state, cli_bank, run, template_bank  # noqa: F401 - fixtures

from cli import main

REPO = Path(__file__).resolve().parents[2]


def one_line_failure(result) -> str:
    """The single line a failed command printed (it must not have crashed with a traceback)."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def _two_records(workspace: Path, **changes) -> str:
    """Two new JSONL records taken from an export: a good one, then one with ``changes``."""
    out = workspace.parent / "good.jsonl"
    assert run(workspace, "export", str(out)).exit_code == 0
    record = json.loads(out.read_text().splitlines()[0])
    good = {**record, "id": "e" * 32, "title": "A first imported entry"}
    bad = {**record, "id": "f" * 32, "title": "A second imported entry", **changes}
    return json.dumps(good) + "\n" + json.dumps(bad) + "\n"


BAD_RECORDS = [
    ({"created_at": 12345}, "'created_at' must be ISO-8601 text"),
    ({"created_at": "not a date"}, "'created_at' ('not a date') is not an ISO-8601 time"),
    ({"updated_at": "2024-13-45"}, "'updated_at'"),
    ({"provenance": "notalist"}, "'provenance' must be a list"),
    ({"provenance": [["x"]]}, "'provenance[0]' must be an object"),
    ({"provenance": [{"source": 5}]}, "'provenance[0].source' must be text"),
    ({"provenance": [{"trajectory_ids": "e1"}]}, "'provenance[0].trajectory_ids'"),
    ({"provenance": [{"similarity": "high"}]}, "'provenance[0].similarity'"),
    ({"provenance": [{"created_at": "yesterday"}]}, "'provenance[0].created_at'"),
    ({"provenance": [{"colour": "red"}]}, "unknown key(s) colour"),
    ({"principle": "a\x00b"}, "'principle' contains a NUL character"),
    ({"when_to_apply": "\x00"}, "'when_to_apply' contains a NUL character"),
    ({"provenance": [{"reason": "x\x00"}]}, "'provenance[0].reason' contains a NUL"),
    ({"revision": 0}, "'revision' (0) must be an integer from 1"),
    ({"support_count": 0}, "'support_count' (0) must be an integer from 1"),
    ({"times_retrieved": True}, "'times_retrieved' (True) must be an integer from 0"),
    ({"times_retrieved": -1}, "'times_retrieved' (-1) must be an integer from 0"),
    ({"times_retrieved": 10**30}, "'times_retrieved' (1e+30) must be an integer from 0 to"),
    ({"title": "a\udc80b"}, "contains a lone surrogate"),
    ({"title": "red \x1b[2J"}, "title contains U+001B (\\x1b, a control character) at position 4"),
    ({"principle": "x\u202eevil"}, "principle contains U+202E (RIGHT-TO-LEFT OVERRIDE, a bidi"),
    ({"id": "   "}, "is not an entry id"),
    ({"id": "\U0001f600" * 40}, "is not an entry id"),
    ({"title": "t" * 1_000_000}, "title is 1000000 characters long (max 300)"),
]


@pytest.mark.parametrize(("changes", "message"), BAD_RECORDS, ids=lambda v: str(v)[:40])
def test_a_malformed_jsonl_record_is_refused_naming_line_and_field(
    cli_bank,  # noqa: F811
    embedder,
    changes,
    message,
):
    workspace, _ = cli_bank
    bad = workspace.parent / "bad.jsonl"
    bad.write_text(_two_records(workspace, **changes))
    before = bank_state(workspace, embedder)
    line = one_line_failure(run(workspace, "import", str(bad)))
    assert "bad.jsonl:2:" in line and message in line, line
    assert bank_state(workspace, embedder) == before


BAD_COMMANDS = [
    (("export", "{tmp}/no/such/folder/bank.jsonl"), "the folder {tmp}/no/such/folder does not"),
    (("edit", "{id}", "--failure-point", "x"), "failure_point is for mistake notes only"),
    (("add", "--kind", "general", "--title", "t", "--principle", "p", "--correction", "c"),
     "correction is for mistake notes only"),
    (("add", "--kind", "task", "--env", "nosuchenv", "--category", "c", "--title", "t",
      "--principle", "p"),
     "env ('nosuchenv') is not a registered environment; known: "),
    (("edit", "{id}", "--env", "webshp"), "env ('webshp') is not a registered environment"),
    (("show", "5"), "'5' is too short to pick an entry: give its full id or at least 6"),
    (("history", "abc"), "at least 6 characters"),
    (("revert", "{id}", str(10**23)), "has no revision 1000000000000000000000"),
    (("search", "shoes", "--k-general", str(10**20)),
     "k_general (100000000000000000000) must be an integer from 0 to 100"),
    (("add", "--kind", "general", "--title", "x" * 1_000_000, "--principle", "p"),
     "title is 1000000 characters long (max 300)"),
    (("add", "--kind", "general", "--title", "\udcff", "--principle", "p"),
     "title contains U+DCFF (a lone surrogate: the text was not valid UTF-8)"),
    (("edit", "{id}", "--title", "see \x1b]8;;http://x\x1b\\link"),
     "title contains U+001B (\\x1b, a control character) at position 4"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "message"), BAD_COMMANDS, ids=lambda v: " ".join(v)[:30]
                         if isinstance(v, tuple) else None)  # fmt: skip
def test_bad_commands_print_one_line_and_change_nothing(
    cli_bank,  # noqa: F811
    tmp_path,
    embedder,
    args,
    message,
):
    workspace, size_id = cli_bank
    values = {"id": size_id, "tmp": str(tmp_path)}
    before = bank_state(workspace, embedder)
    line = one_line_failure(run(workspace, *[a.format(**values) for a in args]))
    assert message.format(**values) in line, line
    assert bank_state(workspace, embedder) == before
    assert not (tmp_path / "no").exists()


def test_a_workspace_that_cannot_be_created_fails_in_one_line(tmp_path):
    # Tests run as root, which may write anywhere: a file where a folder should be fails the
    # same way for everyone (the read-only folder itself is covered below, as a non-root user).
    blocker = tmp_path / "file"
    blocker.write_text("not a folder\n")
    result = CliRunner().invoke(main, ["skills", "list", "--workspace", str(blocker / "ws")])
    line = one_line_failure(result)
    assert f"cannot create the workspace folder {blocker / 'ws'}" in line, line
    assert blocker.read_text() == "not a folder\n"


def test_the_bank_waits_for_a_busy_writer_then_gives_up_in_one_line(
    cli_bank,  # noqa: F811
    embedder,
    monkeypatch,
):
    import functools

    import memory

    workspace, size_id = cli_bank
    before = bank_state(workspace, embedder)
    monkeypatch.setattr(
        memory, "BankConfig", functools.partial(memory.BankConfig, busy_timeout_s=0.05)
    )
    holder = sqlite3.connect(workspace / "bank.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process in the middle of a long write
    try:
        result = run(workspace, "edit", size_id, "--title", "Changed while busy")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    line = one_line_failure(result)
    assert "the skill bank is busy" in line and "try again" in line, line
    assert bank_state(workspace, embedder) == before
    assert run(workspace, "edit", size_id, "--title", "Changed when free").exit_code == 0


# ------------------------------------------------------------------ read-only, as a non-root user

NON_ROOT = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
"""Run a command without root's power to ignore file permissions (tests run as root)."""


def _cli(workspace: Path, *args: str, drop_root: bool = False) -> subprocess.CompletedProcess:
    return _skillrl(workspace, "skills", *args, drop_root=drop_root)


def _skillrl(workspace: Path, *args: str, drop_root: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "COLUMNS": "200",
           "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}  # fmt: skip
    command = [sys.executable, "-m", "cli", *args, "--workspace", str(workspace)]
    return subprocess.run(
        (NON_ROOT if drop_root else []) + command,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )


def _make_read_only(path: Path, writable: bool) -> None:
    for folder, dirs, files in os.walk(path):
        for name in [*dirs, *files, ""]:
            target = Path(folder) / name
            mode = target.stat().st_mode
            bits = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
            os.chmod(target, (mode | stat.S_IWUSR) if writable else (mode & ~bits))


def _read_only_is_enforced(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    probe.chmod(0o555)
    try:
        done = subprocess.run([*NON_ROOT, "touch", str(probe / "x")], capture_output=True)
    except OSError:
        return False
    finally:
        probe.chmod(0o755)
    return done.returncode != 0


@pytest.mark.slow
def test_a_read_only_workspace_serves_reads_and_refuses_writes_in_one_line(
    cli_bank,  # noqa: F811
    tmp_path,
):
    if shutil.which("setpriv") is None or not _read_only_is_enforced(tmp_path):
        pytest.skip("cannot run a command without root's file-permission override here")
    workspace, size_id = cli_bank
    before = tmp_path / "before.jsonl"
    assert _cli(workspace, "export", str(before)).returncode == 0
    files = sorted(workspace.rglob("*"))
    _make_read_only(workspace, writable=False)
    try:
        listed = _cli(workspace, "list", "--json", drop_root=True)
        assert listed.returncode == 0, listed.stderr
        assert size_id in {e["id"] for e in json.loads(listed.stdout)}
        shown = _cli(workspace, "show", size_id[:8], "--json", drop_root=True)
        assert shown.returncode == 0 and json.loads(shown.stdout)["id"] == size_id, shown.stderr
        found = _cli(workspace, "search", "running shoes in size 9", "--json", drop_root=True)
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["task"][0]["id"] == size_id
        for args in (("add", "--kind", "general", "--title", "t", "--principle", "p"),
                     ("edit", size_id, "--title", "Renamed")):  # fmt: skip
            done = _cli(workspace, *args, drop_root=True)
            lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
            assert done.returncode == 1 and len(lines) == 1, done.stdout + done.stderr
            assert "read-only" in lines[0] and "Traceback" not in done.stderr
        after = tmp_path / "after.jsonl"
        assert _cli(workspace, "export", str(after), drop_root=True).returncode == 0
        assert after.read_text() == before.read_text()
    finally:
        _make_read_only(workspace, writable=True)
    assert sorted(workspace.rglob("*")) == files


@pytest.mark.slow
def test_run_on_a_read_only_bank_refuses_to_record_up_front_and_plays_with_no_record(
    cli_bank,  # noqa: F811
    tmp_path,
):
    if shutil.which("setpriv") is None or not _read_only_is_enforced(tmp_path):
        pytest.skip("cannot run a command without root's file-permission override here")
    workspace, _ = cli_bank
    files = sorted(workspace.rglob("*"))
    _make_read_only(workspace, writable=False)
    try:
        play = ("run", "--policy", "expert", "--episodes", "1", "--json")
        refused = _skillrl(workspace, *play, drop_root=True)
        lines = [line for line in (refused.stdout + refused.stderr).splitlines() if line.strip()]
        assert refused.returncode == 1 and len(lines) == 1, refused.stdout + refused.stderr
        assert "read-only" in lines[0] and "--no-record" in lines[0], lines[0]
        played = _skillrl(workspace, *play, "--no-record", drop_root=True)
        assert played.returncode == 0, played.stdout + played.stderr
        assert len(json.loads(played.stdout)["episodes"]) == 1
    finally:
        _make_read_only(workspace, writable=True)
    assert sorted(workspace.rglob("*")) == files


@pytest.mark.slow
def test_a_folder_that_is_read_only_for_the_user_fails_in_one_line(tmp_path):
    if shutil.which("setpriv") is None or not _read_only_is_enforced(tmp_path):
        pytest.skip("cannot run a command without root's file-permission override here")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        listed = _cli(locked / "ws", "list", drop_root=True)  # a read creates nothing
        done = _cli(locked / "ws", "reindex", drop_root=True)
    finally:
        locked.chmod(0o755)
    assert listed.returncode == 0 and "0 entries" in listed.stdout, listed.stdout + listed.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stdout + done.stderr
    assert f"cannot create the workspace folder {locked / 'ws'}: Permission denied" in lines[0]
    assert list(locked.iterdir()) == []
