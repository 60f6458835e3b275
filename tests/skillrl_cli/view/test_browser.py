"""The view in Debian's headless chromium: step through an episode, edit an entry, escaping.

Marked ``browser``: without /usr/bin/chromium or Playwright these tests fail with the install
command (``bash scripts/install.sh dev``), they never skip silently. Each page type is saved
as a screenshot: into ``docs/images/`` for the README with ``SKILLRL_VIEW_SCREENSHOTS=1``,
else into a temporary folder (a test run leaves the tracked images alone).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillrl_cli.view.app import ViewConfig, build_app
from skillrl_cli.view.security import ViewSecurity

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]  # fmt: skip
README_IMAGES = Path(__file__).resolve().parents[3] / "docs" / "images"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server(view_workspace) -> Iterator[str]:
    """The view on a free loopback port, served by uvicorn in a thread."""
    import uvicorn

    app = build_app(
        view_workspace.bank, ViewConfig(runs_dir=view_workspace.root / "runs"), ViewSecurity()
    )
    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not running.started:
        if time.monotonic() > deadline:
            pytest.fail("the view's server did not start within 30 s")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    running.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def page(server) -> Iterator[object]:
    """One chromium page for the module (Debian's chromium, never a downloaded browser)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `bash scripts/install.sh dev` (apt chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as error:
        pytest.fail(f"playwright is missing: pip install -e '.[dev]' ({error})")
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        opened = browser.new_page(viewport={"width": 1200, "height": 900})
        yield opened
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """Where screenshots go: the README's images when asked for, else a temporary folder."""
    if os.environ.get("SKILLRL_VIEW_SCREENSHOTS") == "1":
        return README_IMAGES
    return tmp_path_factory.mktemp("view-shots")


def _shot(page, folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"view-{name}.png"), full_page=True)


def test_step_through_an_episode_and_see_each_turns_retrieved_entries(
    page, server, view_workspace, shots
):
    page.goto(f"{server}/episodes")
    _shot(page, shots, "episodes")
    page.click(f"a[href='/episodes/{view_workspace.episode_id}']")
    shown = page.locator(".turn.shown")
    assert shown.locator(".action").inner_text() == "search[red shoes]"
    assert shown.locator(".retrieved li").count() == 2
    assert "Pick the" in shown.locator(".retrieved").inner_text()
    page.click("#next")
    assert page.locator(".turn.shown .action").inner_text() == "click[b0001]"
    assert page.locator(".turn.shown .retrieved li.kept").count() == 1
    cut = page.locator(".turn.shown .retrieved li.cut del")  # struck out: the budget cut it
    assert cut.count() == 1 and cut.inner_text().startswith("<script>")
    assert page.evaluate("window.pwned") is None
    _shot(page, shots, "episode")  # the turn with an entry kept and one struck out
    page.click("#next")
    assert page.locator(".turn.shown .action").inner_text() == "click[buy now]"
    assert page.locator("#turn-label").inner_text() == "turn 3 of 3"


def test_an_edit_shows_in_the_page_and_in_skills_history(page, server, view_workspace, shots):
    from click.testing import CliRunner

    from cli import main

    entry_id = view_workspace.script_id
    page.goto(f"{server}/skills/{entry_id}")
    page.fill("textarea[name=principle]", "Escape everything you show.")
    page.fill("input[name=reason]", "edited in the browser")
    page.click("#save")
    page.wait_for_url(f"{server}/skills/{entry_id}")
    assert page.locator("#principle").inner_text() == "Escape everything you show."
    assert page.locator("#revision").inner_text() == "2"
    assert "edited in the browser" in page.locator("#revisions").inner_text()
    _shot(page, shots, "entry")
    history = CliRunner().invoke(
        main, ["skills", "history", entry_id, "--workspace", str(view_workspace.root), "--json"]
    )
    assert history.exit_code == 0, history.output
    assert "edited in the browser" in history.output


def test_an_entry_holding_a_script_tag_renders_as_text(page, server, view_workspace, shots):
    page.goto(f"{server}/skills/{view_workspace.script_id}")
    assert page.evaluate("window.pwned") is None
    assert page.locator("#entry-title").inner_text().startswith("<script>")
    page.goto(f"{server}/skills")
    assert page.evaluate("window.pwned") is None
    _shot(page, shots, "bank")
    page.goto(f"{server}/runs/r1")
    _shot(page, shots, "run")


def test_a_run_page_leads_to_its_cycles_grpo_groups_side_by_side(page, server, shots):
    page.goto(f"{server}/runs/r1")
    assert page.locator("#chart-eval\\.success_rate polygon.band").count() == 1
    page.click("a[href='/runs/r1/cycles/1']")
    kept = page.locator("section.group.kept")
    assert kept.count() == 1 and page.locator("section.group.dropped").count() == 2
    assert kept.locator("th a").count() == 2  # the group's two episodes, side by side
    assert kept.locator(".turn-advantage").first.inner_text() == "A +1.000"
    assert page.evaluate("window.pwned") is None
    _shot(page, shots, "groups")


def test_a_run_page_shows_its_main_charts_full_width_and_folds_the_rest(page, server, shots):
    page.goto(f"{server}/runs/r1")
    main = page.locator("#main-charts figure.chart")
    assert main.count() == 3
    assert page.locator("#more-charts figure.chart").count() == 2
    assert not page.locator("#chart-groups\\.kept").is_visible()  # folded until opened
    success = page.locator("#chart-eval\\.success_rate")
    labels = success.locator(".axis-label")
    assert labels.all_text_contents() == ["cycle", "success rate"]
    chart_width = success.locator("svg").bounding_box()["width"]
    main_width = page.locator("main").bounding_box()["width"]
    assert chart_width > 0.85 * main_width  # the axes span the page, not 40% of it
    _shot(page, shots, "run")
    page.click("#more-charts summary")
    assert page.locator("#chart-groups\\.kept").is_visible()


def test_episodes_filter_by_run_and_cycle_and_link_to_their_run_and_group(
    page, server, view_workspace
):
    page.goto(f"{server}/episodes")
    page.select_option("select[name=run]", "r1")
    page.fill("input[name=cycle]", "1")
    page.click("#episode-filters button")
    page.wait_for_url("**/episodes?run=r1&cycle=1*")
    assert page.locator("a.episode-link").count() == 2
    page.fill("input[name=cycle]", "2")
    page.click("#episode-filters button")
    page.wait_for_url("**cycle=2*")
    assert page.locator("a.episode-link").count() == 0
    page.goto(f"{server}/episodes/{view_workspace.episode_id}")
    page.click("#origin a.cycle-link")
    page.wait_for_url(f"{server}/runs/r1/cycles/1#group-grp-1")
    assert page.locator("section#group-grp-1").is_visible()
    page.click("h1 a.run-link")
    page.wait_for_url(f"{server}/runs/r1")
    assert page.locator("#main-charts figure.chart").count() == 3
