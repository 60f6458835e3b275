"""The view's server: refusals (cross-origin edits, open binds), 404 pages, escaping."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from skillrl_cli.view.app import ViewConfig, build_app
from skillrl_cli.view.security import UnsafeBindError, ViewSecurity, security_for_bind


@pytest.fixture(scope="module")
def security() -> ViewSecurity:
    return ViewSecurity()


@pytest.fixture(scope="module")
def client(view_workspace, security) -> TestClient:
    config = ViewConfig(runs_dir=view_workspace.root / "runs")
    return TestClient(build_app(view_workspace.bank, config, security))


def test_an_edit_without_the_csrf_token_is_refused_and_the_bank_is_unchanged(
    client, view_workspace
):
    before = view_workspace.bank.history(view_workspace.size_id)
    answer = client.post(
        f"/skills/{view_workspace.size_id}/edit",
        data={"title": "hijacked"},
        headers={"Origin": "http://evil.example"},
    )
    assert answer.status_code == 403
    assert view_workspace.bank.get(view_workspace.size_id).title != "hijacked"
    assert view_workspace.bank.history(view_workspace.size_id) == before


def test_a_non_loopback_bind_without_a_token_is_refused():
    with pytest.raises(UnsafeBindError, match="--token"):
        security_for_bind("0.0.0.0", None)
    assert security_for_bind("127.0.0.1", None).access_token is None
    assert security_for_bind("0.0.0.0", "s3cret").access_token == "s3cret"


def test_a_token_protected_view_refuses_requests_without_it(view_workspace):
    app = build_app(view_workspace.bank, ViewConfig(), ViewSecurity(access_token="s3cret"))
    guarded = TestClient(app)
    assert guarded.get("/skills").status_code == 401
    assert guarded.get("/skills?token=wrong").status_code == 401
    assert guarded.get("/skills?token=s3cret").status_code == 200
    assert guarded.get("/skills").status_code == 200  # the cookie now carries it


@pytest.mark.parametrize("path", ["/skills/nope-nope", "/episodes/nope", "/runs/nope"])
def test_an_unknown_id_answers_a_404_page_not_a_traceback(client, path):
    answer = client.get(path)
    assert answer.status_code == 404
    assert "<h1>404</h1>" in answer.text
    assert "Traceback" not in answer.text


def test_entry_text_is_escaped_everywhere(client, view_workspace):
    for path in (f"/skills/{view_workspace.script_id}", "/skills",
                 f"/episodes/{view_workspace.episode_id}"):  # fmt: skip
        page = client.get(path).text
        assert "<script>window.pwned" not in page
        assert "<img src=x" not in page
    assert "&lt;script&gt;window.pwned" in client.get("/skills").text


def test_an_edit_with_the_token_is_a_revision_in_the_history(client, view_workspace, security):
    entry_id = view_workspace.size_id
    answer = client.post(
        f"/skills/{entry_id}/edit",
        data={"csrf": security.csrf_token, "title": "Pick the exact size", "reason": "clearer"},
    )
    assert answer.status_code == 200  # followed the redirect to the entry page
    history = view_workspace.bank.history(entry_id)
    assert history[-1].author == "view" and history[-1].reason == "clearer"
    assert history[-1].data["title"] == "Pick the exact size"
    assert "Pick the exact size" in answer.text


def test_read_only_hides_and_refuses_changes(view_workspace, security):
    app = build_app(view_workspace.bank, ViewConfig(read_only=True), security)
    readonly = TestClient(app)
    page = readonly.get(f"/skills/{view_workspace.script_id}").text
    assert "edit-form" not in page
    data = {"csrf": security.csrf_token}
    assert readonly.post(f"/skills/{view_workspace.script_id}/retire", data=data).status_code == 403
    assert view_workspace.bank.get(view_workspace.script_id).status == "active"


def test_episodes_filter_and_runs_draw_curves(client, view_workspace):
    assert client.get("/episodes?outcome=success").text.count("episode-link") == 1
    assert client.get("/episodes?goal=goal-7").text.count("episode-link") == 2
    assert client.get("/episodes?split=train").text.count("episode-link") == 0
    run = client.get("/runs/r1").text
    assert "<polyline" in run and "success" in run
    assert 'http-equiv="refresh"' in run


def test_the_command_refuses_another_host_without_a_token_in_one_line(tmp_path):
    from click.testing import CliRunner

    from cli import main

    answer = CliRunner().invoke(main, ["view", "--workspace", str(tmp_path), "--host", "0.0.0.0"])
    assert answer.exit_code == 2
    assert "without an access token" in answer.output
    assert not (tmp_path / "skills.db").exists()  # refused before opening anything


def test_the_retrieve_box_shows_what_a_turn_would_retrieve_without_recording_it(
    client, view_workspace
):
    before = view_workspace.bank.get(view_workspace.size_id).times_retrieved
    page = client.get("/retrieve", params={"task": "buy red shoes size 9", "page": "size 9",
                                           "env": "webshop"}).text  # fmt: skip
    assert f"/skills/{view_workspace.size_id}" in page
    assert view_workspace.bank.get(view_workspace.size_id).times_retrieved == before
