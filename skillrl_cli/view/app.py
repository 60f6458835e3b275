"""The view's Starlette app: server-rendered Jinja pages over the bank, its episodes and runs.

Every read and write goes through :class:`memory.SkillBank` (the calls the ``skills`` commands
make), so an edit made here is a revision in ``skillrl skills history`` like any other. Every
failure is a page with its status code and one line: a refusal (4xx), damaged run files (500),
and, as the last resort, any other exception (500, its traceback in the server's log).
"""

from __future__ import annotations

import difflib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from memory.stats import ScopeTotals, entry_utility
from skillrl_cli.view.charts import run_charts
from skillrl_cli.view.forms import form_revision, read_form
from skillrl_cli.view.groups import cycle_groups
from skillrl_cli.view.origins import EpisodeOrigin, OriginIndex, portable_agent
from skillrl_cli.view.security import SAFE_METHODS, ViewSecurity
from skillrl_core.errors import (
    CheckpointError,
    DataFileError,
    InvalidEntryError,
    SkillNotFoundError,
    SkillRLError,
    StaleRevisionError,
)
from skillrl_core.records import EpisodeRecord
from trainers.cycle.checkpoint_choice import RunChoice
from trainers.cycle.run_files import RunFiles
from trainers.cycle.run_settings import saved_cycle_config, saved_grpo_config
from trainers.runs import SFT_RUN, RunSummary, read_run

if TYPE_CHECKING:
    from memory import SkillBank

logger = logging.getLogger(__name__)

TOKEN_COOKIE = "skillrl_view_token"
EDITABLE_TEXT_FIELDS = ("title", "principle", "when_to_apply")
CHANGE_ACTIONS = ("edit", "retire", "restore", "revert")


@dataclass(frozen=True)
class ViewConfig:
    """What one ``skillrl view`` serves."""

    read_only: bool = False
    """Hide and refuse every change to the bank."""
    runs_dir: Path | None = None
    """Folder of training runs (each with a ``metrics.jsonl``); None shows no runs."""
    author: str = "view"
    """Author recorded on revisions made through the view."""


@dataclass(frozen=True)
class EpisodeRow:
    """One row of the episodes page: the episode, where it came from, its model's name."""

    episode: EpisodeRecord
    """The stored episode."""
    origin: EpisodeOrigin | None
    """The run and cycle whose rollout played it (None: not a training rollout of a run here)."""
    stored_at: datetime | None
    """When the bank stored it."""
    agent: str
    """The agent that played it, its model named portably (:func:`portable_agent`)."""


def _templates() -> Environment:
    # Autoescape every template: entries, pages and model output are untrusted text.
    env = Environment(
        loader=PackageLoader("skillrl_cli.view", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    env.filters["utc"] = _utc
    return env


def _utc(seconds: float) -> str:
    """Return a file time (seconds since the epoch) as a UTC minute; "" for none."""
    if not seconds:
        return ""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M")


def _diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Unified diff lines between two revisions' content."""
    before = json.dumps(old, indent=1, sort_keys=True, default=str).splitlines()
    after = json.dumps(new, indent=1, sort_keys=True, default=str).splitlines()
    return list(difflib.unified_diff(before, after, lineterm="", n=1))[2:]


@dataclass(frozen=True)
class RunMetrics:
    """Where a run's metrics are and what their rows count."""

    path: Path
    """Its ``metrics.jsonl``."""
    x_key: str
    """``cycle`` for a ``skillrl train`` run, ``round`` for a ``skillrl sft`` run."""


def _run_metrics(folder: Path) -> RunMetrics | None:
    """Return a run folder's metrics (a train run's own before a cold start's); None: none."""
    if (folder / "metrics.jsonl").is_file():
        return RunMetrics(folder / "metrics.jsonl", "cycle")
    if (folder / SFT_RUN / "metrics.jsonl").is_file():
        return RunMetrics(folder / SFT_RUN / "metrics.jsonl", "round")
    return None


@dataclass(frozen=True)
class RunRow:
    """One run of the runs page."""

    name: str
    """Its folder name."""
    summary: RunSummary | None
    """What ``skillrl runs`` says of it (None: no ``state.json``, or a damaged one)."""
    has_page: bool
    """Whether it has metrics to draw (a run page)."""


def _run_rows(runs_dir: Path | None) -> list[RunRow]:
    """Every run folder with metrics or a state (``skillrl runs``' runs), newest first."""
    if runs_dir is None or not runs_dir.is_dir():
        return []
    rows = []
    for folder in runs_dir.iterdir():
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        summary, has_page = read_run(folder), _run_metrics(folder) is not None
        if summary is not None or has_page:
            rows.append(RunRow(folder.name, summary, has_page))
    return sorted(rows, key=lambda r: (-(r.summary.updated if r.summary else 0.0), r.name))


def _read_choice(files: RunFiles) -> RunChoice | str | None:
    """Return the run's chosen cycle (``best.json``), what is wrong with it, or None."""
    try:
        return files.load_choice()
    except CheckpointError as error:
        return str(error)


def _read_metrics(path: Path) -> list[dict[str, Any]]:
    """Rows of a run's ``metrics.jsonl``; DataFileError when it is not text of JSON objects."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise DataFileError(
            f"{path} is not UTF-8 text (byte {error.start}: {error.reason}); the run's metrics "
            "are damaged"
        ) from error
    except OSError as error:
        raise DataFileError(f"cannot read {path}: {error.strerror or error}") from error
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue  # a line a writer left unfinished: the other rows still draw
        if not isinstance(row, dict):
            raise DataFileError(
                f"{path} line {number} is a JSON {type(row).__name__}, not an object of "
                "metrics; the run's metrics are damaged"
            )
        rows.append(row)
    return rows


def build_app(bank: SkillBank, config: ViewConfig, security: ViewSecurity) -> Starlette:
    """Return the ASGI app serving ``bank`` under ``config`` and ``security``."""
    env = _templates()

    def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(name).render(
            read_only=config.read_only, csrf=security.csrf_token, request=request, **context
        )
        return HTMLResponse(html, status_code=status_code)

    def error_page(status: int, detail: str, headers: dict[str, str] | None = None) -> HTMLResponse:
        html = env.get_template("error.html").render(
            read_only=config.read_only, status=status, detail=detail
        )
        return HTMLResponse(html, status_code=status, headers=headers)

    def entry_or_404(entry_id: str) -> Any:
        try:
            return bank.get(entry_id)
        except SkillNotFoundError as error:
            raise HTTPException(404, f"no entry {entry_id}") from error

    origins = OriginIndex(config.runs_dir)

    def episodes_all() -> list[Any]:
        return bank.trajectories.episodes()

    async def index(request: Request) -> Response:
        return RedirectResponse("/episodes", status_code=303)

    async def episodes(request: Request) -> Response:
        q = request.query_params
        found = origins.origins()
        times = bank.trajectories.stored_at()
        rows = [
            EpisodeRow(
                e, found.get(e.episode_id), times.get(e.episode_id),
                portable_agent(e.agent, config.runs_dir),
            )
            for e in episodes_all()
        ]  # fmt: skip
        runs_seen = sorted({r.origin.run for r in rows if r.origin is not None})
        if q.get("split"):
            rows = [r for r in rows if r.episode.split == q["split"]]
        if q.get("goal"):
            rows = [r for r in rows if q["goal"] in r.episode.goal_id
                    or q["goal"] in r.episode.instruction]  # fmt: skip
        if q.get("outcome") in ("success", "failure"):
            rows = [r for r in rows if r.episode.success == (q["outcome"] == "success")]
        if q.get("agent"):
            rows = [r for r in rows if q["agent"] in r.agent or q["agent"] in r.episode.agent]
        if q.get("run"):
            rows = [r for r in rows if r.origin is not None and r.origin.run == q["run"]]
        if q.get("cycle"):
            cycle = q["cycle"].strip()
            if not cycle.isdecimal() or not cycle.isascii():
                raise HTTPException(400, f"cycle ({cycle[:20]!r}) must be a cycle number")
            rows = [r for r in rows if r.origin is not None and r.origin.cycle == int(cycle)]
        return render(request, "episodes.html", rows=rows, query=q, runs_seen=runs_seen)

    async def episode(request: Request) -> Response:
        wanted = request.path_params["episode_id"]
        found = bank.trajectories.episodes(episode_id=wanted)  # one row, not every episode
        if not found:
            raise HTTPException(404, f"no episode {wanted}")
        record = found[0]
        shown = {i for t in record.turns for i in t.retrieved_ids + (t.left_out_ids or [])}
        entries = bank.entries(sorted(shown))
        group = bank.trajectories.episodes(group_id=record.group_id) if record.group_id else []
        return render(request, "episode.html", episode=record, entries=entries, group=group,
                      origin=origins.origins().get(record.episode_id),
                      agent=portable_agent(record.agent, config.runs_dir))  # fmt: skip

    async def skills(request: Request) -> Response:
        q = request.query_params.get("q", "").lower()
        status = request.query_params.get("status", "active") or None
        rows = bank.list(status=None if status == "any" else status)
        if q:
            rows = [e for e in rows if q in f"{e.title} {e.principle} {e.when_to_apply}".lower()]
        totals = ScopeTotals(bank)  # the utility `skillrl skills list` shows, computed as it does
        utility = {e.id: entry_utility(e, totals.of(e)) for e in rows}
        return render(request, "skills.html", entries=rows, q=q, status=status or "any",
                      utility=utility)  # fmt: skip

    async def skill(request: Request) -> Response:
        entry = entry_or_404(request.path_params["entry_id"])
        history = bank.history(entry.id)
        diffs = [
            (rev, _diff(history[i - 1].data, rev.data) if i else [])
            for i, rev in enumerate(history)
        ]
        used_in = [e for e in episodes_all() if any(entry.id in t.retrieved_ids for t in e.turns)]
        return render(request, "skill.html", entry=entry, diffs=diffs, used_in=used_in)

    async def skill_change(request: Request) -> Response:
        if config.read_only:
            raise HTTPException(403, "this view is read-only: nothing can be changed through it")
        action = request.path_params["action"]
        if action not in CHANGE_ACTIONS:
            raise HTTPException(404, f"no action {action} (one of {', '.join(CHANGE_ACTIONS)})")
        form = await read_form(request)
        if not security.csrf_ok(form.get("csrf")):
            raise HTTPException(403, "missing or wrong CSRF token: change entries from their page")
        entry = entry_or_404(request.path_params["entry_id"])
        reason = form.get("reason", "")
        if action == "edit":
            loaded = form_revision(
                form, "revision", "the revision the form was loaded from: reload the entry's page"
            )
            # A browser sends a textarea's line breaks as CRLF (HTML's form encoding); the bank
            # holds LF and refuses a carriage return as a control character.
            sent = {
                name: form[name].replace("\r\n", "\n")
                for name in EDITABLE_TEXT_FIELDS
                if name in form
            }
            changes = {name: text for name, text in sent.items() if text != getattr(entry, name)}
            try:  # even an edit that changes nothing is refused when made from a stale page
                bank.edit(
                    entry.id,
                    author=config.author,
                    reason=reason,
                    expected_revision=loaded,
                    **changes,
                )
            except StaleRevisionError as error:
                return stale_page(request, entry.id, error, form)
        elif action == "retire":
            bank.retire(entry.id, author=config.author, reason=reason)
        elif action == "restore":
            bank.restore(entry.id, author=config.author, reason=reason)
        else:
            revision = form_revision(form, "revision", "the revision to go back to")
            bank.revert(entry.id, revision, author=config.author)
        return RedirectResponse(f"/skills/{entry.id}", status_code=303)

    def stale_page(
        request: Request, entry_id: str, error: StaleRevisionError, form: dict[str, str]
    ) -> Response:
        """Answer a stale edit with 409: what changed since the form was loaded, what it sent."""
        history = bank.history(entry_id)
        loaded = next((rev for rev in history if rev.revision == error.expected), None)
        changed = _diff(loaded.data, history[-1].data) if loaded is not None else []
        sent = {
            name: form[name]
            for name in EDITABLE_TEXT_FIELDS
            if name in form and (loaded is None or form[name] != loaded.data.get(name))
        }
        return render(request, "stale.html", status_code=409, detail=str(error),
                      entry_id=entry_id, changed=changed, sent=sent)  # fmt: skip

    async def retrieve(request: Request) -> Response:
        from memory.types import RetrievalQuery

        task = request.query_params.get("task", "")
        page = request.query_params.get("page", "")
        env_id = request.query_params.get("env", "")
        results = None
        if task:
            import envs

            # What the task asks its product to come in picks among one request's cases, as in
            # a turn; an environment that is not registered here names none.
            wants = envs.wanted_values(env_id, task)
            query = RetrievalQuery(instruction=task, observation=page, env=env_id, wants=wants)
            results = bank.retrieve([query], record=False)[0]
        return render(request, "retrieve.html", task=task, page=page, env_id=env_id,
                      results=results)  # fmt: skip

    async def runs(request: Request) -> Response:
        return render(request, "runs.html", runs=_run_rows(config.runs_dir))

    def run_folder_or_404(name: str) -> tuple[RunFiles, RunMetrics]:
        folder = (config.runs_dir or Path("/nonexistent")) / name
        metrics = _run_metrics(folder) if "/" not in name and ".." not in name else None
        if metrics is None:
            raise HTTPException(404, f"no run {name}")
        return RunFiles(folder), metrics

    def run_files_or_404(name: str) -> RunFiles:
        return run_folder_or_404(name)[0]

    async def run(request: Request) -> Response:
        names = [n for n in request.path_params["names"].split("+") if n]
        found = [(name, *run_folder_or_404(name)) for name in names]
        x_keys = {metrics.x_key for _, _, metrics in found}
        if len(x_keys) > 1:
            raise HTTPException(400, "compare runs of one kind: sft rounds and train cycles "
                                     "are not one axis")  # fmt: skip
        runs = [(name, _read_metrics(metrics.path)) for name, _, metrics in found]
        cycles = [(name, files.rollout_cycles()) for name, files, _ in found]
        choices = [(name, _read_choice(files)) for name, files, _ in found]
        return render(
            request,
            "run.html",
            names=names,
            charts=run_charts(runs, x_keys.pop() if x_keys else "cycle"),
            cycles=cycles,
            choices=choices,
        )

    async def groups(request: Request) -> Response:
        name, cycle = request.path_params["name"], request.path_params["cycle"]
        files = run_files_or_404(name)
        phase = files.load_rollout(cycle)
        record = files.load_update_record(cycle)
        saved = saved_cycle_config(files)
        if phase is None:
            raise HTTPException(404, f"run {name} has no rollout of cycle {cycle}")
        dynamic = saved.dynamic_sampling if saved is not None else True
        grpo = saved_grpo_config(files)
        # A run saved without a config.json predates the estimator setting: it trained GRPO.
        estimator = grpo.estimator if grpo is not None else "grpo"
        views = cycle_groups(phase, record, dynamic_sampling=dynamic)
        return render(request, "groups.html", run_name=name, cycle=cycle, groups=views,
                      phase=phase, record=record, estimator=estimator,
                      dynamic_sampling=dynamic)  # fmt: skip

    async def refused(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException):
            return error_page(exc.status_code, exc.detail, exc.headers)
        if isinstance(exc, SkillNotFoundError):
            return error_page(404, str(exc))
        if isinstance(exc, InvalidEntryError):  # names the field: "title is 400 characters ..."
            return error_page(400, f"not saved: {exc}")
        return error_page(500, str(exc))  # damaged run files, a bank that failed

    async def guard(request: Request, call_next: Any) -> Response:
        """Refuse foreign hosts, missing tokens and cross-site changes; the last-resort 500."""
        host = request.headers.get("host")
        if not security.host_ok(host):
            names = ", ".join(sorted(security.allowed_hosts or ()))
            line = f"this view answers to {names}, not to the host {(host or '')[:80]!r}"
            return error_page(400, f"{line}: open it by one of those names")
        supplied = request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE)
        if not security.access_ok(supplied):
            line = "access token required: open the URL `skillrl view` printed (with ?token=)"
            return error_page(401, line)
        origin, referer = request.headers.get("origin"), request.headers.get("referer")
        if request.method not in SAFE_METHODS and not security.origin_ok(
            origin, referer, host or ""
        ):
            line = "refused: this change was sent from another site's page, not the view's own"
            return error_page(403, line)
        try:
            response = await call_next(request)
        except Exception as error:  # the last resort: a page, never a bare traceback
            logger.exception("the view failed on %s %s", request.method, request.url.path)
            line = f"the view failed on this request ({type(error).__name__}); see the server's log"
            return error_page(500, line)
        if security.access_token and request.query_params.get("token"):
            response.set_cookie(
                TOKEN_COOKIE, security.access_token, httponly=True, samesite="strict"
            )
        return response

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/episodes", episodes),
            Route("/episodes/{episode_id}", episode),
            Route("/skills", skills),
            Route("/skills/{entry_id}", skill),
            Route("/skills/{entry_id}/{action}", skill_change, methods=["POST"]),
            Route("/retrieve", retrieve),
            Route("/runs", runs),
            Route("/runs/{names}", run),
            Route("/runs/{name}/cycles/{cycle:int}", groups),
            Mount("/static", StaticFiles(packages=[("skillrl_cli.view", "static")]), name="static"),
        ],
        exception_handlers={HTTPException: refused, SkillRLError: refused},
        middleware=[Middleware(BaseHTTPMiddleware, dispatch=guard)],
    )

    return app
