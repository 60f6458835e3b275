"""What each page says about where an episode came from: run, cycle, group, model, links."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from skillrl_cli.view.app import ViewConfig, build_app
from skillrl_cli.view.origins import portable_agent
from skillrl_cli.view.security import ViewSecurity

LOCAL = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def client(view_workspace) -> TestClient:
    config = ViewConfig(runs_dir=view_workspace.root / "runs")
    return TestClient(build_app(view_workspace.bank, config, ViewSecurity()), base_url=LOCAL)


def _rows(page: str) -> list[str]:
    return page.split('<table id="episodes">')[1].split("</table>")[0].split("<tr>")[2:]


def test_the_episodes_list_names_each_rollouts_run_cycle_and_date(client, view_workspace):
    page = client.get("/episodes").text
    assert "<th>run</th><th>cycle</th>" in page and "<th>stored (UTC)</th>" in page
    (winner,) = [r for r in _rows(page) if view_workspace.episode_id[:10] in r]
    assert '<a class="run-link" href="/runs/r1">r1</a>' in winner
    assert 'href="/runs/r1/cycles/1#group-grp-1">1</a>' in winner
    assert '<td class="agent">transformers:r1/cycle-0001</td>' in winner
    assert re.search(r"<td>20\d\d-\d\d-\d\d \d\d:\d\d</td>", winner)  # when the bank stored it
    assert str(view_workspace.root) not in page  # never an absolute path


def test_episodes_filter_by_run_and_cycle(client):
    assert client.get("/episodes?run=r1").text.count("episode-link") == 2
    assert client.get("/episodes?run=r1&cycle=1").text.count("episode-link") == 2
    assert client.get("/episodes?run=r1&cycle=2").text.count("episode-link") == 0
    assert client.get("/episodes?run=nope").text.count("episode-link") == 0
    assert client.get("/episodes?agent=r1/cycle-0001").text.count("episode-link") == 1
    refused = client.get("/episodes?cycle=%3Cb%3E")
    assert refused.status_code == 400 and "&lt;b&gt;" in refused.text


def test_an_episode_links_back_to_its_run_cycle_and_group(client, view_workspace):
    page = client.get(f"/episodes/{view_workspace.episode_id}").text
    origin = page.split('<p id="origin">')[1].split("</p>")[0]
    assert '<a class="run-link" href="/runs/r1">r1</a>' in origin
    assert '<a class="cycle-link" href="/runs/r1/cycles/1#group-grp-1">cycle 1</a>' in origin
    assert 'class="group-link" href="/runs/r1/cycles/1#group-grp-1">grp-1</a>' in origin
    groups = client.get("/runs/r1/cycles/1").text
    assert '<a class="run-link" href="/runs/r1">r1</a>' in groups
    assert 'href="/episodes?run=r1&amp;cycle=1"' in groups
    assert 'id="group-grp-1"' in groups


def test_a_reward_breakdown_is_a_table_of_its_parts_not_a_dict_repr(client, view_workspace):
    page = client.get(f"/episodes/{view_workspace.episode_id}").text
    shown = page.split('<div id="reward-breakdown">')[1].split("</div>")[0]
    assert "{" not in shown and "'" not in shown
    assert "<th>r_att</th><td>1</td>" in shown
    nested = '<th>attributes</th><td><table class="breakdown"><tr><th>&lt;b&gt;size&lt;/b&gt;</th>'
    assert nested in shown


def test_the_groups_page_of_a_grpo_run_says_grpo_and_of_an_rft_run_says_rft(
    client, view_workspace, tmp_path
):
    assert "<h1>GRPO groups of" in client.get("/runs/r1/cycles/1").text
    import shutil

    from trainers.cycle.config import CycleConfig
    from trainers.cycle.run_files import RunFiles
    from trainers.cycle.run_settings import run_settings
    from trainers.update.config import GRPOConfig

    copy = tmp_path / "runs"
    shutil.copytree(view_workspace.root / "runs", copy)
    RunFiles(copy / "r1").save_config(
        run_settings(CycleConfig(dynamic_sampling=False), GRPOConfig(estimator="rft"))
    )
    app = build_app(view_workspace.bank, ViewConfig(runs_dir=copy), ViewSecurity())
    page = TestClient(app, base_url=LOCAL).get("/runs/r1/cycles/1").text
    assert "GRPO" not in page.split("</h1>")[0]
    assert "<h1>Rollout groups of" in page and "<b>RFT</b>" in page
    assert "Dynamic sampling was off" in page


@pytest.mark.parametrize(
    ("agent", "shown"),
    [("expert", "expert"), ("transformers:embedded", "transformers:embedded"),
     ("transformers:Qwen/Qwen3-0.6B", "transformers:Qwen/Qwen3-0.6B"),
     ("transformers:/ws/runs/r2/checkpoints/cycle-0004", "transformers:r2/cycle-0004"),
     ("transformers:/ws/runs/s/sft/checkpoints/round-0002", "transformers:s/round-0002"),
     ("transformers:/home/me/.cache/skillrl/adapters/webshop-lora",
      "transformers:…/adapters/webshop-lora"),
     ("vllm:C:\\models\\mine", "vllm:…/models/mine")],
)  # fmt: skip
def test_an_agents_model_is_named_portably(agent, shown):
    assert portable_agent(agent, Path("/ws/runs")) == shown


def _figures(html: str) -> list[str]:
    return [part.split('"')[0] for part in html.split('<figure class="chart" id="chart-')[1:]]


def test_a_run_page_leads_with_the_charts_that_matter_and_folds_the_rest(client):
    page = client.get("/runs/r1").text
    main = page.split('<div id="main-charts">')[1].split("</div>")[0]
    more = page.split('<details id="more-charts">')[1].split("</details>")[0]
    assert _figures(main) == ["eval.success_rate", "eval.mean_score", "update.loss"]
    assert _figures(more) == ["groups.kept", "cycle.seconds"]
    assert "<summary>2 more metrics" in more
    for figure in page.split('<figure class="chart"')[1:]:
        assert ">cycle</text>" in figure and 'class="axis-label y-label"' in figure
        assert 'width="100%"' in figure  # the page's full width, not a fixed 520 px
        ticks = re.findall(r'class="tick y-tick"[^>]*>([^<]*)</text>', figure)
        assert len(ticks) == len(set(ticks)) >= 3  # never 0.01, 0.01
        cycles = [int(t) for t in re.findall(r'class="tick x-tick"[^>]*>([^<]*)</text>', figure)]
        assert cycles == list(range(cycles[0], 4))  # whole cycles, up to the last one run
    assert 'href="/episodes?run=r1"' in page


def _sft_run(folder: Path) -> None:
    import json

    sft = folder / "sft"
    sft.mkdir(parents=True)
    (sft / "state.json").write_text(json.dumps({"history": [{"round": 0}], "done": True}))
    (sft / "config.json").write_text(json.dumps({"cold_start": {"env_id": "webshop",
                                                                "dagger_rounds": 1}}))  # fmt: skip
    rows = [{"round": 0, "train.loss": 1.5}, {"round": 1, "train.loss": 0.75}]
    (sft / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_runs_list_has_sft_runs_too_with_env_kind_status_and_progress(view_workspace, tmp_path):
    import shutil

    copy = tmp_path / "runs"
    shutil.copytree(view_workspace.root / "runs", copy)
    _sft_run(copy / "<i>cold")
    app = build_app(view_workspace.bank, ViewConfig(runs_dir=copy), ViewSecurity())
    listed = TestClient(app, base_url=LOCAL).get("/runs").text
    rows = listed.split('<tr class="run-row">')[1:]
    (sft,) = [r for r in rows if "cold" in r]
    assert "<i>cold" not in listed and "&lt;i&gt;cold" in sft
    assert "<td>webshop</td><td>sft</td><td>1/2 rounds</td>" in sft
    assert '<td class="ok">done</td>' in sft
    (r1,) = [r for r in rows if 'href="/runs/r1"' in r]
    assert "no state.json" in r1
    page = TestClient(app, base_url=LOCAL).get("/runs/%3Ci%3Ecold")
    assert page.status_code == 200 and "<i>cold" not in page.text
    assert 'id="chart-train.loss"' in page.text and ">round</text>" in page.text
    mixed = TestClient(app, base_url=LOCAL).get("/runs/r1+%3Ci%3Ecold")
    assert mixed.status_code == 400 and "one kind" in mixed.text


def test_the_bank_shows_each_entrys_utility_as_skills_list_computes_it(client, view_workspace):
    from memory.stats import ScopeTotals, entry_utility

    bank = view_workspace.bank
    entry = bank.get(view_workspace.size_id)
    expected = entry_utility(entry, ScopeTotals(bank).of(entry))
    page = client.get("/skills").text
    assert ">utility</th>" in page
    row = page.split(f'href="/skills/{entry.id}"')[1].split("</tr>")[0]
    assert f'<td class="utility">{expected:+.3f}</td>' in row
    # Its page keeps counted turns and stored episodes apart (evaluations count no turns).
    usage = client.get(f"/skills/{entry.id}").text
    assert f"retrieved in {entry.times_retrieved} counted turns" in usage
    assert f"in {entry.episodes_retrieved} stored episodes, of which" in usage


def test_the_retrieve_box_keeps_its_environment_and_every_page_has_a_favicon(client):
    page = client.get("/retrieve?task=buy+shoes&page=&env=%3Cwebshop%3E").text
    assert '<input name="env" value="&lt;webshop&gt;">' in page
    assert '<link rel="icon" type="image/svg+xml" href="/static/favicon.svg">' in page
    icon = client.get("/static/favicon.svg")
    assert icon.status_code == 200 and icon.text.startswith("<svg")
