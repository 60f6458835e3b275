"""The view's server: refusals (cross-origin edits, open binds), 404 pages, escaping."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from skillrl_cli.view.app import ViewConfig, build_app
from skillrl_cli.view.security import UnsafeBindError, ViewSecurity, security_for_bind

LOCAL = "http://127.0.0.1:8765"
"""Where the tests' requests go: a loopback name, as a browser on the machine sends it."""


@pytest.fixture(scope="module")
def security() -> ViewSecurity:
    return ViewSecurity()


@pytest.fixture(scope="module")
def client(view_workspace, security) -> TestClient:
    config = ViewConfig(runs_dir=view_workspace.root / "runs")
    return TestClient(build_app(view_workspace.bank, config, security), base_url=LOCAL)


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
    guarded = TestClient(app, base_url=LOCAL)
    assert guarded.get("/skills").status_code == 401
    assert guarded.get("/skills?token=wrong").status_code == 401
    assert guarded.get("/skills?token=s3cret").status_code == 200
    assert guarded.get("/skills").status_code == 200  # the cookie now carries it


@pytest.mark.parametrize(
    "path", ["/skills/nope-nope", "/episodes/nope", "/runs/nope", "/runs/r1/cycles/7",
             "/runs/nope/cycles/1", "/runs/r1/cycles/x"]
)  # fmt: skip
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
    loaded = view_workspace.bank.get(entry_id).revision  # the edit form carries it
    answer = client.post(
        f"/skills/{entry_id}/edit",
        data={"csrf": security.csrf_token, "title": "Pick the exact size", "reason": "clearer",
              "revision": str(loaded)},
    )  # fmt: skip
    assert answer.status_code == 200  # followed the redirect to the entry page
    history = view_workspace.bank.history(entry_id)
    assert history[-1].author == "view" and history[-1].reason == "clearer"
    assert history[-1].data["title"] == "Pick the exact size"
    assert "Pick the exact size" in answer.text


def test_read_only_hides_and_refuses_changes(view_workspace, security):
    app = build_app(view_workspace.bank, ViewConfig(read_only=True), security)
    readonly = TestClient(app, base_url=LOCAL)
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


def test_a_run_page_draws_success_with_its_interval_band_and_labelled_axes(client):
    run = client.get("/runs/r1").text
    success = run.split('id="chart-eval.success_rate"')[1].split("</figure>")[0]
    assert success.count('class="band"') == 1  # the 95% Wilson interval, shaded
    assert ">cycle</text>" in success and ">success rate</text>" in success
    assert "Evaluation success rate (band: 95% Wilson interval)</figcaption>" in success
    assert '<text class="tick y-tick"' in success and ">1.0</text>" in success
    assert "cycle 3: eval.success_rate = 0.500 (95% interval 0.24-0.76)" in success
    minutes = run.split('id="chart-cycle.seconds"')[1].split("</figure>")[0]
    assert ">wall minutes</text>" in minutes and 'class="band"' not in minutes
    assert "cycle 3: cycle.seconds = 4.500" in minutes  # 270 s drawn as minutes
    assert 'id="chart-update.loss"' in run  # every other metric follows
    assert 'id="chart-eval.episodes"' not in run  # a count behind a band is not a curve


def test_two_runs_compared_share_the_axes(client):
    both = client.get("/runs/r1+r1").text
    success = both.split('id="chart-eval.success_rate"')[1].split("</figure>")[0]
    assert success.count("<polyline") == 2 and success.count('class="band"') == 2
    assert both.count("&#9632; r1") == 2  # the legend names both


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


def test_an_episode_turn_shows_kept_entries_and_those_the_budget_cut_struck_out(
    client, view_workspace
):
    page = client.get(f"/episodes/{view_workspace.episode_id}").text
    turns = page.split('<section class="turn')[1:]
    assert turns[0].count('class="kept"') == 2 and 'class="cut"' not in turns[0]
    assert turns[1].count('class="kept"') == 1
    cut = turns[1].split('class="cut"')[1]
    assert cut.startswith(f'><del><a href="/skills/{view_workspace.script_id}">&lt;script&gt;')
    assert "cut by the prompt budget" in cut
    assert "<script>window.pwned" not in page
    assert "were not recorded" not in turns[0] + turns[1]  # recorded: kept and cut both known


def test_a_constrained_turn_lists_the_scored_candidates_best_first_with_the_choice_marked(
    client, view_workspace
):
    page = client.get(f"/episodes/{view_workspace.episode_id}").text
    turns = page.split('<section class="turn')[1:]
    assert "candidate actions the policy scored" not in turns[0]  # none recorded there
    table = turns[1].split('<details class="candidates">')[1].split("</details>")[0]
    rows = table.split("<tr")[2:]
    assert [r.split("<code>")[1].split("</code>")[0] for r in rows] == [
        "click[b0001]",
        "click[&lt;b&gt;b0002&lt;/b&gt;]",
        "click[next &gt;]",
    ]
    assert rows[0].startswith(' class="chosen"') and "chosen</span>" in rows[0]
    assert ">-0.5000<" in rows[0] and ">-2.0000<" in rows[2]
    assert "<b>b0002" not in page


UNTRUSTED_TEXT = st.tuples(
    st.text(max_size=20),
    st.sampled_from(
        ["<script>window.pwned=1</script>", "<b>", "&amp;", '"><img src=x>', "\x1b[31m<"]
    ),
    st.text(max_size=20),
).map("".join)
"""Text with markup in it, as pages, model output and entries may hold (prompt injection)."""


def _tags(page: str) -> list[str]:
    """The start tags of an HTML page with their attributes, in order."""
    from html.parser import HTMLParser

    class Tags(HTMLParser):
        found: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.found.append(f"{tag} {sorted(k for k, _ in attrs)}")

    parser = Tags()
    parser.found = []
    parser.feed(page)
    return parser.found


def _episode_page(text: str) -> str:
    from skillrl_cli.view.app import _templates
    from skillrl_core.records import EpisodeRecord, TurnRecord

    turn = TurnRecord(turn=0, observation=text, available_actions=[text], action=text,
                      action_valid=True, reward=0.0, model_output=text,
                      retrieved_ids=["k"], left_out_ids=["c"])  # fmt: skip
    record = EpisodeRecord("webshop", text, text, text, turns=[turn], reward_breakdown={text: text})
    entries = {"k": SimpleNamespace(title=text), "c": SimpleNamespace(title=text)}
    return (
        _templates()
        .get_template("episode.html")
        .render(episode=record, entries=entries, group=[], read_only=True, csrf="", request=None)
    )


@settings(max_examples=60, deadline=None)
@given(text=UNTRUSTED_TEXT)
def test_any_title_page_or_output_renders_as_text_in_an_episode(text):
    from markupsafe import escape

    page = _episode_page(text)
    assert str(escape(text)) in page
    # The markup is the template's alone: the same tags as with plain text in every field.
    assert _tags(page) == _tags(_episode_page("plain"))


def test_a_cycles_groups_side_by_side_with_advantages_and_why_each_was_kept_or_dropped(
    client, view_workspace
):
    run = client.get("/runs/r1").text
    assert 'href="/runs/r1/cycles/1"' in run
    page = client.get("/runs/r1/cycles/1").text
    kept = page.split('id="group-grp-1"')[1].split("</section>")[0]
    assert "kept: its episodes&#39; returns differ" in kept
    assert kept.count('<th><a href="/episodes/') == 2  # G episodes side by side
    assert "A<sup>E</sup> = +1.000" in kept and "A<sup>E</sup> = -1.000" in kept
    assert kept.count('class="turn-advantage"') == 4  # 3 turns of one episode, 1 of the other
    assert "A +1.250" in kept and "A<sup>S</sup> +0.500" in kept and "r +0.99" in kept
    assert "left out: action substituted" in kept
    flat = page.split('id="group-flat"')[1].split("</section>")[0]
    assert "dropped: every episode got the same return" in flat
    assert 'class="turn-advantage"' not in flat  # never trained: no advantage invented
    broken = page.split('id="group-broken"')[1].split("</section>")[0]
    assert "dropped: an episode ended on an error (RuntimeError: &lt;server&gt; gone)" in broken
    assert "<b>search page</b>" not in page and "search[&lt;i&gt;boots&lt;/i&gt;]" in page
    assert "buy &lt;boots&gt;" in page


def test_a_cycle_without_advantages_json_says_so_and_shows_none(view_workspace, security):
    import shutil

    copy = view_workspace.root / "runs-copy"
    shutil.copytree(view_workspace.root / "runs", copy, dirs_exist_ok=True)
    (copy / "r1" / "cycles" / "0001" / "advantages.json").unlink()
    app = build_app(view_workspace.bank, ViewConfig(runs_dir=copy), security)
    page = TestClient(app, base_url=LOCAL).get("/runs/r1/cycles/1").text
    assert 'id="no-advantages"' in page and 'class="turn-advantage"' not in page
    assert "kept: its episodes&#39; returns differ" in page


def test_a_run_page_says_which_cycle_the_run_chose_and_its_paired_test(client, view_workspace):
    from trainers.cycle.checkpoint_choice import EvaluatedCycle, PairedTest, RunChoice
    from trainers.cycle.run_files import RunFiles

    files = RunFiles(view_workspace.root / "runs" / "r1")
    assert "leaves" not in client.get("/runs/r1").text  # a run that chose nothing says nothing
    test = PairedTest(300, 203, 214, 20, 9, 0.06, 0.8, 0.82)
    evaluated = EvaluatedCycle(2, 75, 100, 0.85)
    files.save_choice(RunChoice(2, "checkpoints/cycle-0002", evaluated, "eval", 4, test))
    page = client.get("/runs/r1").text
    assert "leaves <strong>cycle 2</strong> (checkpoints/cycle-0002), chosen on 100 eval" in page
    assert "stopped early after cycle 4" in page
    assert "214 solved, against 203 at cycle 0 (20 won, 9 lost, exact McNemar p = 0.06)" in page
    files.choice_path.write_text("[1]")
    assert "best.json" in client.get("/runs/r1").text  # damaged: named, not a server error
