"""Rich rendering for ``skillrl skills`` (tables for people; JSON for scripts)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table


def console() -> Console:
    """Return the console commands print to (stdout; plain when it is not a terminal)."""
    return Console(soft_wrap=False)


def print_json(data: Any) -> None:
    """Print ``data`` as indented JSON (plain, so scripts can parse it)."""
    import click

    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _short(text: str | None, width: int = 60) -> str:
    text = (text or "").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def print_entries(entries: list[Any], utility: dict[str, float]) -> None:
    """Print one row per entry."""
    table = Table(title=f"{len(entries)} entries")
    for column in ("id", "kind", "env/category", "title", "status", "used", "ok/fail", "utility"):
        table.add_column(column, overflow="fold")
    for e in entries:
        scope = "/".join(p for p in (e.env, e.category) if p) or "-"
        table.add_row(
            e.id[:12],
            e.kind,
            scope,
            _short(e.title),
            e.status,
            str(e.times_retrieved),
            f"{e.success_episodes}/{e.failure_episodes}",
            f"{utility.get(e.id, 0.0):+.2f}",
        )
    console().print(table)


def print_entry(entry: Any, history: list[Any]) -> None:
    """Print one entry in full."""
    out = console()
    table = Table(title=f"{entry.kind} {entry.id}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    fields = ["title", "principle", "when_to_apply", "env", "category"]
    if entry.kind == "mistake":
        fields += ["failure_point", "flawed_action", "correction"]
    fields += ["status", "revision", "source", "external_id", "support_count", "times_retrieved",
               "episodes_retrieved", "success_episodes", "failure_episodes", "created_at",
               "updated_at"]  # fmt: skip
    for name in fields:
        value = getattr(entry, name)
        table.add_row(name, "" if value is None else str(value))
    out.print(table)
    prov = Table(title="provenance")
    for column in ("when", "source", "author", "trajectories", "similarity", "reason"):
        prov.add_column(column, overflow="fold")
    for p in entry.provenance:
        sim = "" if p["similarity"] is None else f"{p['similarity']:.3f}"
        prov.add_row(p["created_at"], p["source"], p["author"], str(len(p["trajectory_ids"])),
                     sim, _short(p["reason"], 40))  # fmt: skip
    out.print(prov)
    print_history(history)


def print_history(revisions: list[Any]) -> None:
    """Print one row per revision."""
    table = Table(title="revisions")
    for column in ("rev", "when", "author", "status", "title", "reason"):
        table.add_column(column, overflow="fold")
    for r in revisions:
        table.add_row(str(r.revision), r.created_at, r.author, r.data.get("status", ""),
                      _short(r.data.get("title"), 40), _short(r.reason, 40))  # fmt: skip
    console().print(table)


def print_retrieved(result: Any) -> None:
    """Print what retrieval returned, per kind."""
    table = Table(title="retrieval")
    for column in ("kind", "similarity", "id", "title"):
        table.add_column(column, overflow="fold")
    for kind in ("general", "task", "mistakes"):
        for r in getattr(result, kind):
            table.add_row(kind, f"{r.similarity:.3f}", r.entry.id[:12], _short(r.entry.title))
    console().print(table)


def print_snapshots(infos: list[Any]) -> None:
    """Print one row per snapshot."""
    table = Table(title="snapshots")
    for column in ("name", "created", "entries"):
        table.add_column(column)
    for i in infos:
        table.add_row(i.name, i.created_at, str(i.entries))
    console().print(table)


def print_diff(result: Any) -> None:
    """Print the added, removed and changed entries between two snapshots."""
    out = console()
    if result.empty:
        out.print(f"no differences between {result.a} and {result.b}")
        return
    table = Table(title=f"{result.a} -> {result.b}")
    for column in ("change", "id", "title", "fields"):
        table.add_column(column, overflow="fold")
    for e in result.added:
        table.add_row("[green]added[/]", e["id"][:12], _short(e["title"]), "")
    for e in result.removed:
        table.add_row("[red]removed[/]", e["id"][:12], _short(e["title"]), "")
    for c in result.changed:
        detail = "; ".join(f"{k}: {_short(str(a), 30)} -> {_short(str(b), 30)}"
                           for k, (a, b) in c.fields.items())  # fmt: skip
        table.add_row("[yellow]changed[/]", c.entry_id[:12], _short(c.title), detail)
    out.print(table)


def print_stats(summary: dict[str, Any]) -> None:
    """Print the bank summary as a few small tables."""
    out = console()
    kinds = Table(title="entries")
    for column in ("kind", "active", "retired"):
        kinds.add_column(column)
    for kind, counts in summary["entries"].items():
        kinds.add_row(kind, str(counts.get("active", 0)), str(counts.get("retired", 0)))
    out.print(kinds)
    cats = Table(title="active task skills by category")
    for column in ("env", "category", "active"):
        cats.add_column(column)
    for row in summary["task_skills_by_category"]:
        cats.add_row(row["env"] or "", row["category"] or "", str(row["active"]))
    out.print(cats)
    ep = summary["episodes"]
    out.print(
        f"episodes: {ep['total']} ({ep['successes']} successful, {ep['distilled']} distilled)"
    )
    index = summary["index"]
    state = "[green]in agreement[/]" if index["ok"] else "[red]DISAGREES: run reindex[/]"
    out.print(f"index ({summary['embedder']}): {index['indexed']} vectors for "
              f"{index['sql_active']} active entries, {state}")  # fmt: skip
    out.print(f"snapshots: {summary['snapshots']}")
