"""The view's Starlette app: server-rendered Jinja pages over the bank, its episodes and runs.

Every read and write goes through :class:`memory.SkillBank` (the calls the ``skills`` commands
make), so an edit made here is a revision in ``skillrl skills history`` like any other.
"""

from __future__ import annotations

import difflib
import json
import logging
from dataclasses import dataclass
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

from skillrl_cli.view.charts import run_charts
from skillrl_cli.view.groups import cycle_groups
from skillrl_cli.view.security import ViewSecurity
from skillrl_core.errors import SkillNotFoundError, SkillRLError
from trainers.run_files import RunFiles
from trainers.run_settings import saved_cycle_config

if TYPE_CHECKING:
    from memory import SkillBank

logger = logging.getLogger(__name__)

TOKEN_COOKIE = "skillrl_view_token"
EDITABLE_TEXT_FIELDS = ("title", "principle", "when_to_apply")


@dataclass(frozen=True)
class ViewConfig:
    """What one ``skillrl view`` serves."""

    read_only: bool = False
    """Hide and refuse every change to the bank."""
    runs_dir: Path | None = None
    """Folder of training runs (each with a ``metrics.jsonl``); None shows no runs."""
    author: str = "view"
    """Author recorded on revisions made through the view."""


def _templates() -> Environment:
    # Autoescape every template: entries, pages and model output are untrusted text.
    return Environment(
        loader=PackageLoader("skillrl_cli.view", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )


def _diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Unified diff lines between two revisions' content."""
    before = json.dumps(old, indent=1, sort_keys=True, default=str).splitlines()
    after = json.dumps(new, indent=1, sort_keys=True, default=str).splitlines()
    return list(difflib.unified_diff(before, after, lineterm="", n=1))[2:]


def _read_metrics(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a run in progress may be mid-write
    return rows


def build_app(bank: SkillBank, config: ViewConfig, security: ViewSecurity) -> Starlette:
    """Return the ASGI app serving ``bank`` under ``config`` and ``security``."""
    env = _templates()

    def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(name).render(
            read_only=config.read_only, csrf=security.csrf_token, request=request, **context
        )
        return HTMLResponse(html, status_code=status_code)

    def entry_or_404(entry_id: str) -> Any:
        try:
            return bank.get(entry_id)
        except SkillNotFoundError as error:
            raise HTTPException(404, f"no entry {entry_id}") from error

    def episodes_all() -> list[Any]:
        return bank.trajectories.episodes()

    async def index(request: Request) -> Response:
        return RedirectResponse("/episodes", status_code=303)

    async def episodes(request: Request) -> Response:
        q = request.query_params
        rows = episodes_all()
        if q.get("split"):
            rows = [e for e in rows if e.split == q["split"]]
        if q.get("goal"):
            rows = [e for e in rows if q["goal"] in e.goal_id or q["goal"] in e.instruction]
        if q.get("outcome") in ("success", "failure"):
            rows = [e for e in rows if e.success == (q["outcome"] == "success")]
        if q.get("agent"):
            rows = [e for e in rows if q["agent"] in e.agent]
        return render(request, "episodes.html", episodes=rows, query=q)

    async def episode(request: Request) -> Response:
        wanted = request.path_params["episode_id"]
        found = [e for e in episodes_all() if e.episode_id == wanted]
        if not found:
            raise HTTPException(404, f"no episode {wanted}")
        record = found[0]
        shown = {i for t in record.turns for i in t.retrieved_ids + (t.left_out_ids or [])}
        entries = bank.entries(sorted(shown))
        group = [e for e in episodes_all() if record.group_id and e.group_id == record.group_id]
        return render(request, "episode.html", episode=record, entries=entries, group=group)

    async def skills(request: Request) -> Response:
        q = request.query_params.get("q", "").lower()
        status = request.query_params.get("status", "active") or None
        rows = bank.list(status=None if status == "any" else status)
        if q:
            rows = [e for e in rows if q in f"{e.title} {e.principle} {e.when_to_apply}".lower()]
        return render(request, "skills.html", entries=rows, q=q, status=status or "any")

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
            raise HTTPException(403, "this view is read-only")
        form = await request.form()
        if not security.csrf_ok(form.get("csrf")):
            raise HTTPException(403, "missing or wrong CSRF token")
        entry = entry_or_404(request.path_params["entry_id"])
        action = request.path_params["action"]
        reason = str(form.get("reason", ""))
        if action == "edit":
            changes = {
                name: str(form[name])
                for name in EDITABLE_TEXT_FIELDS
                if name in form and str(form[name]) != getattr(entry, name)
            }
            if changes:
                bank.edit(entry.id, author=config.author, reason=reason, **changes)
        elif action == "retire":
            bank.retire(entry.id, author=config.author, reason=reason)
        elif action == "restore":
            bank.restore(entry.id, author=config.author, reason=reason)
        elif action == "revert":
            bank.revert(entry.id, int(str(form.get("revision"))), author=config.author)
        else:
            raise HTTPException(404, f"no action {action}")
        return RedirectResponse(f"/skills/{entry.id}", status_code=303)

    async def retrieve(request: Request) -> Response:
        from memory.types import RetrievalQuery

        task = request.query_params.get("task", "")
        page = request.query_params.get("page", "")
        env_id = request.query_params.get("env", "")
        results = None
        if task:
            query = RetrievalQuery(instruction=task, observation=page, env=env_id)
            results = bank.retrieve([query], record=False)[0]
        return render(request, "retrieve.html", task=task, page=page, results=results)

    async def runs(request: Request) -> Response:
        found = []
        if config.runs_dir and config.runs_dir.is_dir():
            found = sorted(p.parent.name for p in config.runs_dir.glob("*/metrics.jsonl"))
        return render(request, "runs.html", runs=found)

    def run_files_or_404(name: str) -> RunFiles:
        folder = (config.runs_dir or Path("/nonexistent")) / name
        if "/" in name or ".." in name or not (folder / "metrics.jsonl").is_file():
            raise HTTPException(404, f"no run {name}")
        return RunFiles(folder)

    async def run(request: Request) -> Response:
        names = [n for n in request.path_params["names"].split("+") if n]
        found = [(name, run_files_or_404(name)) for name in names]
        runs = [(name, _read_metrics(files.metrics_path)) for name, files in found]
        cycles = [(name, files.rollout_cycles()) for name, files in found]
        return render(request, "run.html", names=names, charts=run_charts(runs), cycles=cycles)

    async def groups(request: Request) -> Response:
        name, cycle = request.path_params["name"], request.path_params["cycle"]
        files = run_files_or_404(name)
        try:
            phase = files.load_rollout(cycle)
            record = files.load_update_record(cycle)
            saved = saved_cycle_config(files)
        except SkillRLError as error:
            raise HTTPException(500, str(error)) from error
        if phase is None:
            raise HTTPException(404, f"run {name} has no rollout of cycle {cycle}")
        dynamic = saved.dynamic_sampling if saved is not None else True
        views = cycle_groups(phase, record, dynamic_sampling=dynamic)
        return render(request, "groups.html", run_name=name, cycle=cycle, groups=views,
                      phase=phase, record=record)  # fmt: skip

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        detail = getattr(exc, "detail", "error")
        return render(request, "error.html", status_code=status, status=status, detail=detail)

    async def require_token(request: Request, call_next: Any) -> Response:
        supplied = request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE)
        if not security.access_ok(supplied):
            return HTMLResponse("access token required", status_code=401)
        response = await call_next(request)
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
        exception_handlers={HTTPException: not_found},
        middleware=[Middleware(BaseHTTPMiddleware, dispatch=require_token)],
    )

    return app
