"""The view refuses what it must, each time as a page with a 4xx/5xx code and one line.

Foreign hosts and cross-site changes (DNS rebinding, CSRF), damaged run files, malformed forms,
stale edits; and the ``view`` command's refusals (missing workspace, out-of-range port).
"""

from __future__ import annotations

import html
import logging
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from memory import EntryDraft
from skillrl_cli.view.app import ViewConfig, build_app
from skillrl_cli.view.security import ViewSecurity, security_for_bind

LOCAL = "http://127.0.0.1:8765"
"""A loopback origin, as a browser on the machine sends it."""


@pytest.fixture(scope="module")
def security() -> ViewSecurity:
    return ViewSecurity()


@pytest.fixture(scope="module")
def client(view_workspace, security) -> TestClient:
    config = ViewConfig(runs_dir=view_workspace.root / "runs")
    return TestClient(build_app(view_workspace.bank, config, security), base_url=LOCAL)


KEPT_TITLE = "Compare prices before buying"


@pytest.fixture(scope="module")
def kept_id(view_workspace) -> str:
    """An entry every refusal test leaves as it is: one revision, its title unchanged."""
    draft = EntryDraft(kind="general", title=KEPT_TITLE, principle="Open two results first.")
    return view_workspace.bank.add(draft).entry.id


@pytest.fixture
def entry_id(view_workspace) -> Iterator[str]:
    """A fresh entry of its own, so that tests editing it do not meet each other's edits."""
    draft = EntryDraft(kind="general", title="Read the whole page", principle="Scroll first.")
    added = view_workspace.bank.add(draft).entry.id
    assert len(view_workspace.bank.history(added)) == 1  # not merged into an older entry
    yield added
    view_workspace.bank.remove(added)


def _error_line(page: str) -> str:
    """The page's one-line message (the error page's ``<p id="error">``)."""
    found = re.search(r'<p id="error">([^<\n]*)</p>', page)
    assert found is not None, page
    return html.unescape(found.group(1))


def _refused(answer, status: int) -> str:
    assert answer.status_code == status, answer.text
    assert f"<h1>{status}</h1>" in answer.text and "Traceback" not in answer.text
    return _error_line(answer.text)


def _edit(client, security, entry_id, revision, **fields):
    data = {"csrf": security.csrf_token, "revision": str(revision), **fields}
    return client.post(f"/skills/{entry_id}/edit", data=data)


# ------------------------------------------------------------------ hosts and origins


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8765",
        "127.0.0.1.evil.example",
        "evil@127.0.0.1",
        "[::1",
        "",
        "localhost:x",
    ],
)
def test_a_foreign_host_gets_a_400_page_without_the_csrf_token(client, security, host):
    answer = client.get("/skills", headers={"Host": host})
    assert "answers to 127.0.0.1, [::1], localhost" in _refused(answer, 400)
    assert security.csrf_token not in answer.text


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost", "LOCALHOST:1", "[::1]:8765"])
def test_the_loopback_names_are_answered(client, host):
    assert client.get("/skills", headers={"Host": host}).status_code == 200


def test_a_view_with_a_token_also_answers_to_its_bound_host_and_only_with_the_token(
    view_workspace,
):
    bound = TestClient(
        build_app(view_workspace.bank, ViewConfig(), security_for_bind("192.168.1.5", "s3cret")),
        base_url="http://192.168.1.5:8765",
    )
    assert bound.get("/skills", headers={"Host": "evil.example"}).status_code == 400
    assert bound.get("/skills").status_code == 401
    assert bound.get("/skills?token=s3cret").status_code == 200
    everywhere = security_for_bind("0.0.0.0", "s3cret")  # any name the machine is reached by
    anyhost = TestClient(
        build_app(view_workspace.bank, ViewConfig(), everywhere), base_url="http://box.lan:8765"
    )
    assert anyhost.get("/skills").status_code == 401
    assert anyhost.get("/skills?token=s3cret").status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://127.0.0.1:9999"},
        {"Origin": "https://127.0.0.1:8765@evil.example"},
        {"Referer": "http://evil.example/page"},
        {"Origin": "http://[::1"},
    ],
)
def test_a_change_from_another_sites_page_is_refused_even_with_the_csrf_token(
    client, security, view_workspace, kept_id, headers
):
    answer = client.post(
        f"/skills/{kept_id}/edit",
        headers=headers,
        data={"csrf": security.csrf_token, "revision": "1", "title": "hijacked"},
    )
    assert "another site" in _refused(answer, 403)
    assert view_workspace.bank.get(kept_id).title == KEPT_TITLE
    assert len(view_workspace.bank.history(kept_id)) == 1


def test_a_change_from_the_views_own_page_is_saved(client, security, view_workspace, entry_id):
    answer = client.post(
        f"/skills/{entry_id}/edit",
        headers={"Origin": LOCAL},
        data={"csrf": security.csrf_token, "revision": "1", "title": "Read on"},
    )
    assert answer.status_code == 200
    assert view_workspace.bank.get(entry_id).title == "Read on"


def test_a_change_without_the_csrf_token_is_refused_from_the_views_own_origin(
    client, view_workspace, kept_id
):
    answer = client.post(
        f"/skills/{kept_id}/edit",
        headers={"Origin": LOCAL},
        data={"revision": "1", "title": "no token"},
    )
    assert "CSRF" in _refused(answer, 403)
    assert view_workspace.bank.get(kept_id).title == KEPT_TITLE


# ------------------------------------------------------------------ tokens and forms


def test_a_non_ascii_csrf_or_access_token_is_refused_not_a_traceback(
    client, view_workspace, kept_id
):
    answer = client.post(f"/skills/{kept_id}/edit", data={"csrf": "jeton-é", "revision": "1"})
    assert "CSRF" in _refused(answer, 403)
    guarded = TestClient(
        build_app(view_workspace.bank, ViewConfig(), ViewSecurity(access_token="s3cret")),
        base_url=LOCAL,
    )
    assert "access token" in _refused(guarded.get("/skills", params={"token": "s3crèt"}), 401)


def test_a_csrf_token_sent_as_a_file_part_is_refused(client, security, view_workspace, kept_id):
    answer = client.post(
        f"/skills/{kept_id}/edit",
        data={"revision": "1", "title": "file"},
        files={"csrf": ("csrf.txt", security.csrf_token.encode())},
    )
    assert "x-www-form-urlencoded" in _refused(answer, 415)
    assert view_workspace.bank.get(kept_id).title == KEPT_TITLE


@pytest.mark.parametrize(
    ("title", "named"),
    [
        ("x" * 301, "title is 301 characters long"),
        ("   ", "title must not be empty"),
        ("red \x1b[31m shoes", "title contains"),
        ("a\x00b", "title contains a NUL"),
    ],
)
def test_an_invalid_title_is_a_400_page_naming_the_field_and_saves_nothing(
    client, security, view_workspace, kept_id, title, named
):
    line = _refused(_edit(client, security, kept_id, 1, title=title), 400)
    assert line.startswith("not saved: ") and named in line
    assert len(view_workspace.bank.history(kept_id)) == 1


def test_a_malformed_percent_encoding_is_refused_not_saved_as_a_replacement_character(
    client, security, view_workspace, kept_id
):
    body = f"csrf={security.csrf_token}&revision=1&title=caf%E9"  # Latin-1 é: not UTF-8
    answer = client.post(
        f"/skills/{kept_id}/edit",
        content=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert "not valid percent-encoded UTF-8" in _refused(answer, 400)
    assert view_workspace.bank.get(kept_id).title == KEPT_TITLE


def test_a_textareas_crlf_line_breaks_are_saved_as_the_banks_line_feeds(
    client, security, view_workspace, entry_id
):
    # A browser submits every textarea with CRLF, changed or not; the bank refuses a lone CR.
    answer = _edit(client, security, entry_id, 1, title="Read the whole page",
                   principle="Scroll first.\r\nThen read.", when_to_apply="")  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert view_workspace.bank.get(entry_id).principle == "Scroll first.\nThen read."
    unchanged = _edit(client, security, entry_id, 2, title="Read the whole page",
                      principle="Scroll first.\r\nThen read.", when_to_apply="")  # fmt: skip
    assert unchanged.status_code == 200 and len(view_workspace.bank.history(entry_id)) == 2
    lone = _edit(client, security, entry_id, 2, principle="Scroll\rfirst.")
    assert "principle contains U+000D" in _refused(lone, 400)


def test_a_field_sent_twice_is_refused(client, security, view_workspace, kept_id):
    body = f"csrf={security.csrf_token}&revision=1&title=one&title=two"
    answer = client.post(
        f"/skills/{kept_id}/edit",
        content=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert "'title' twice" in _refused(answer, 400)
    assert view_workspace.bank.get(kept_id).title == KEPT_TITLE


@pytest.mark.parametrize(
    ("revision", "status", "says"),
    [
        ("abc", 400, "must be a revision number"),
        (None, 400, "sends no revision"),
        ("١", 400, "must be a revision number"),
        ("999999", 404, "has no revision 999999"),
        (str(10**30), 404, "has no revision"),
        ("0", 404, ">= 1"),
    ],
)
def test_a_revert_to_a_revision_that_is_not_one_is_a_4xx_page(
    client, security, view_workspace, kept_id, revision, status, says
):
    data = {"csrf": security.csrf_token}
    if revision is not None:
        data["revision"] = revision
    answer = client.post(f"/skills/{kept_id}/revert", data=data)
    assert says in _refused(answer, status)
    assert len(view_workspace.bank.history(kept_id)) == 1


# ------------------------------------------------------------------ stale edits


def test_an_edit_from_a_stale_page_is_refused_with_what_changed_and_the_cli_edit_survives(
    client, security, view_workspace, entry_id
):
    page = client.get(f"/skills/{entry_id}").text
    loaded = re.search(r'name="revision" value="(\d+)"', page).group(1)
    # Meanwhile, `skillrl skills edit` (the same bank call) changes the title.
    view_workspace.bank.edit(entry_id, author="cli", title="Changed from the CLI")
    answer = _edit(
        client,
        security,
        entry_id,
        loaded,
        title="Read the whole page first",
        principle="Scroll first.",
    )
    line = _refused(answer, 409)
    assert "is at revision 2, not 1" in line and "nothing was saved" in line
    changed = answer.text.split('<pre id="changed">')[1].split("</pre>")[0]
    assert "Read the whole page" in changed and "Changed from the CLI" in changed
    assert "Read the whole page first" in answer.text  # what was sent, to copy from
    assert view_workspace.bank.get(entry_id).title == "Changed from the CLI"
    assert [r.author for r in view_workspace.bank.history(entry_id)] == ["person", "cli"]


def test_an_edit_form_without_its_revision_is_refused(client, security, view_workspace, kept_id):
    answer = client.post(
        f"/skills/{kept_id}/edit", data={"csrf": security.csrf_token, "title": "no revision"}
    )
    assert "sends no revision" in _refused(answer, 400)
    assert view_workspace.bank.get(kept_id).title == KEPT_TITLE


# ------------------------------------------------------------------ damaged run files


@pytest.fixture
def damaged_runs(view_workspace, tmp_path) -> Path:
    """A copy of the workspace's runs, for a test to damage."""
    copy = tmp_path / "runs"
    shutil.copytree(view_workspace.root / "runs", copy)
    return copy


@pytest.mark.parametrize(
    ("path", "content", "page", "says"),
    [
        ("metrics.jsonl", b"\x89PNG\r\n\x1a\n\x00\xff", "/runs/r1", "not UTF-8 text"),
        ("metrics.jsonl", b'{"cycle": 1}\n[1, 2]\n', "/runs/r1", "line 2 is a JSON list"),
        ("cycles/0001/advantages.json", b"[1, 2]", "/runs/r1/cycles/1", "advantages.json"),
        ("cycles/0001/advantages.json", b"\xff\xfe", "/runs/r1/cycles/1", "advantages.json"),
        ("cycles/0001/rollout.json", b'{"episodes": [[]]}', "/runs/r1/cycles/1", "rollout.json"),
    ],
)
def test_a_damaged_run_file_is_a_500_page_naming_it(
    view_workspace, security, damaged_runs, path, content, page, says
):
    (damaged_runs / "r1" / path).write_bytes(content)
    app = build_app(view_workspace.bank, ViewConfig(runs_dir=damaged_runs), security)
    assert says in _refused(TestClient(app, base_url=LOCAL).get(page), 500)


def test_any_other_failure_is_a_500_page_with_one_line_and_the_traceback_in_the_log(
    security, caplog
):
    def broken(**_):
        raise RuntimeError("disk on fire")

    app = build_app(SimpleNamespace(list=broken), ViewConfig(), security)
    with caplog.at_level(logging.ERROR, logger="skillrl_cli.view.app"):
        answer = TestClient(app, base_url=LOCAL).get("/skills")
    line = _refused(answer, 500)
    assert "RuntimeError" in line and "disk on fire" not in answer.text
    (record,) = [r for r in caplog.records if r.name == "skillrl_cli.view.app"]
    assert "GET /skills" in record.getMessage() and record.exc_info[0] is RuntimeError


# ------------------------------------------------------------------ any form text


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    title=st.text(max_size=320),
    revision=st.one_of(st.none(), st.text(max_size=40), st.integers(-2, 10**31).map(str)),
)
def test_any_title_or_revision_gives_a_page_never_a_500(
    client, security, view_workspace, entry_id, title, revision
):
    current = view_workspace.bank.get(entry_id).revision
    sent = str(current) if revision is None else revision
    answer = _edit(client, security, entry_id, sent, title=title)
    assert answer.status_code in (200, 400, 409), answer.text
    if answer.status_code != 200:
        assert _error_line(answer.text)
    if answer.status_code == 409:
        assert view_workspace.bank.get(entry_id).revision == current


# ------------------------------------------------------------------ the command


def _view(*args: str):
    from click.testing import CliRunner

    from cli import main

    return CliRunner().invoke(main, ["view", *args])


@pytest.mark.parametrize("read_only", [[], ["--read-only"]])
def test_the_command_refuses_a_missing_workspace_in_one_line_and_creates_nothing(
    tmp_path, read_only
):
    missing = tmp_path / "no" / "such" / "workspace"
    answer = _view("--workspace", str(missing), *read_only)
    assert answer.exit_code == 2
    assert f"'--workspace' / $SKILLRL_WORKSPACE: no workspace folder at {missing}" in answer.output
    assert answer.output.count("Error") == 1 and "Traceback" not in answer.output
    assert list(tmp_path.iterdir()) == []  # not even the parent folders


@pytest.mark.parametrize("port", ["-1", "99999", "65536", "http"])
def test_the_command_refuses_a_port_outside_0_to_65535(tmp_path, port):
    answer = _view("--workspace", str(tmp_path), "--port", port)
    assert answer.exit_code == 2 and "Invalid value for '--port'" in answer.output
    assert list(tmp_path.iterdir()) == []


def test_a_workspace_without_a_bank_is_shown_read_only_and_gets_none(tmp_path, monkeypatch):
    import uvicorn

    from skillrl_cli.view import app as view_app

    shown = []
    build = view_app.build_app

    def recording(bank, config, security):
        shown.append((bank.read_only, config.read_only))
        return build(bank, config, security)

    monkeypatch.setattr(view_app, "build_app", recording)
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets: None)
    answer = _view("--workspace", str(tmp_path), "--port", "0")
    assert answer.exit_code == 0, answer.output
    assert shown == [(True, True)]
    assert list(tmp_path.iterdir()) == []  # no bank.sqlite, no chroma/


def test_the_printed_url_has_the_port_actually_listened_on(tmp_path, monkeypatch):
    import uvicorn

    served = []

    def serve(self, sockets):  # instead of serving: note where it would listen
        served.extend((sock, sock.getsockname()[1]) for sock in sockets)

    monkeypatch.setattr(uvicorn.Server, "run", serve)
    answer = _view("--workspace", str(tmp_path), "--port", "0")
    assert answer.exit_code == 0, answer.output
    ((listened, listened_port),) = served
    port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", answer.output).group(1))
    assert port != 0 and port == listened_port
    assert listened.fileno() == -1  # closed when the server stopped


def test_the_command_refuses_a_port_in_use_in_one_line(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        answer = _view("--workspace", str(tmp_path), "--port", str(port))
    assert answer.exit_code == 1
    assert f"cannot listen on 127.0.0.1 port {port}" in answer.output
    assert list(tmp_path.iterdir()) == []  # refused before the bank was opened
