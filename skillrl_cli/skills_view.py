"""Rich rendering for ``skillrl skills`` (tables for people; JSON for scripts).

Bank text (titles, principles, reasons, authors) is shown literally: never read as rich markup
(``click[buy now]`` stays as written, ``[/oops]`` is text), with control characters spelled out
(:func:`skillrl_core.text.visible`) so an entry cannot colour, clear or link a terminal.
"""

from __future__ import annotations

import json
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from skillrl_core.text import visible


def console() -> Console:
    """Return the console commands print to (stdout; plain when it is not a terminal)."""
    return Console(soft_wrap=False)


def print_json(data: Any) -> None:
    """Print ``data`` as indented JSON (plain, so scripts can parse it)."""
    import click

    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


TEXT_COLUMNS: dict[str, int] = {
    "title": 6, "reason": 3, "fields": 4, "env/category": 2, "category": 2, "author": 1,
    "when": 2, "source": 1,
}  # fmt: skip
"""Free-text columns and their share of the width the short columns leave over."""
MIN_TEXT_WIDTH = 6
WRAPPED_COLUMNS = frozenset({"title", "fields", "env/category", "category"})
"""Text columns that wrap onto more lines (at word breaks) instead of ending in '…': a
category cut to its first letters made different entries look alike."""
MIN_WRAPPED_WIDTH = 20
MIN_SQUEEZED_TITLE = 12
"""The least a title column gets when the other columns' least widths leave less than 20."""
MIN_WIDTHS = {"env/category": 10, "category": 10}
"""Wrapped columns narrower than :data:`MIN_WRAPPED_WIDTH` at the least (short words)."""
SHORT_ID = 8
"""Characters of an id tables show (``skills show`` etc. accept any unique prefix of 6+)."""


def fit_widths(
    natural: list[int], shares: list[int], minimum: list[int], available: int
) -> list[int]:
    """Split ``available`` cells among text columns: each gets at most its natural width.

    Columns are filled by share (water-filling): one that needs less than its share keeps its
    natural width and the rest is shared again; none goes below its ``minimum`` (or its
    natural width, when that is smaller).
    """
    widths = [0] * len(natural)
    open_ = [i for i in range(len(natural))]
    left = max(available, 0)
    while open_:
        total = sum(shares[i] for i in open_)
        settled = [i for i in open_ if natural[i] <= left * shares[i] // total]
        if not settled:
            for i in open_:
                widths[i] = max(left * shares[i] // total, min(natural[i], minimum[i]))
            break
        for i in settled:
            widths[i] = natural[i]
            left -= natural[i]
            open_.remove(i)
    # Raising a column to its minimum may overshoot: take the excess from the widest others.
    floor = [min(n, m) for n, m in zip(natural, minimum, strict=True)]
    excess = sum(widths) - max(available, sum(floor))
    while excess > 0:
        widest = max(range(len(widths)), key=lambda i: widths[i] - floor[i])
        widths[widest] -= 1
        excess -= 1
    return widths


def literal(text: object) -> Text:
    """``text`` as rich shows it literally: no markup, control characters made visible."""
    return Text(visible("" if text is None else str(text)))


Cell = str | Text
"""A table cell: a ``str`` is bank text, shown literally; a ``Text`` is the CLI's own styling."""


def _cell(value: Cell) -> Text:
    return value if isinstance(value, Text) else literal(value)


def _table(title: str, columns: tuple[str, ...], rows: list[tuple[Cell, ...]]) -> Table:
    """Build a table that fits the terminal: short columns keep their width, text ones shrink.

    Letting rich wrap every column (its default) put a title one word per line in an 80-column
    terminal. Short columns never wrap, the title column wraps at word breaks and gets most of
    the room, other text columns end in '…'.
    """
    cells = [tuple(_cell(value) for value in row) for row in rows]
    natural = [
        max([cell_len(name)] + [cell_len(r[i].plain) for r in cells])
        for i, name in enumerate(columns)
    ]
    text = [i for i, name in enumerate(columns) if name in TEXT_COLUMNS]
    borders = 3 * len(columns) - 1  # one space of padding either side, one rule between
    available = console().width - borders - sum(w for i, w in enumerate(natural) if i not in text)
    minimum = [max(_minimum(columns[i]), cell_len(columns[i])) for i in text]  # whole headers
    if "title" in columns and sum(minimum) > available:  # the title gives up room first
        at = text.index(columns.index("title"))
        minimum[at] = max(MIN_SQUEEZED_TITLE, minimum[at] - (sum(minimum) - available))
    fitted = dict(
        zip(
            text,
            fit_widths(
                [natural[i] for i in text],
                [TEXT_COLUMNS[columns[i]] for i in text],
                minimum,
                available,
            ),
            strict=True,
        )
    )
    table = Table(title=literal(title), show_edge=False)
    for i, name in enumerate(columns):
        wraps = name in WRAPPED_COLUMNS
        table.add_column(
            name,
            width=fitted.get(i, natural[i]),
            no_wrap=not wraps,
            overflow="fold" if wraps else "ellipsis",
        )
    for row in cells:
        table.add_row(*row)
    return table


def _minimum(column: str) -> int:
    if column in MIN_WIDTHS:
        return MIN_WIDTHS[column]
    return MIN_WRAPPED_WIDTH if column in WRAPPED_COLUMNS else MIN_TEXT_WIDTH


def _short(text: str | None, width: int = 60) -> str:
    text = (text or "").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def print_entries(entries: list[Any], utility: dict[str, float]) -> None:
    """Print one row per entry (a status column only when the statuses differ).

    Entries of one environment show a ``category`` column and name the environment in the
    title; entries of several show ``env/category``.
    """
    envs = {e.env for e in entries if e.env}
    one_env = len(envs) == 1
    place = "category" if one_env else "env/category"
    columns = ("id", "kind", place, "title", "status", "used", "ok/fail", "utility")
    rows = [
        (
            e.id[:SHORT_ID],
            e.kind,
            (e.category if one_env else "/".join(p for p in (e.env, e.category) if p)) or "-",
            _short(e.title),
            e.status,
            str(e.times_retrieved),
            f"{e.success_episodes}/{e.failure_episodes}",
            f"{utility.get(e.id, 0.0):+.2f}",
        )
        for e in entries
    ]
    statuses = {e.status for e in entries}
    where = next(iter(envs)) if one_env else ""
    title = count_entries(len(entries), where)
    if len(statuses) == 1:
        title = count_entries(len(entries), f"{statuses.pop()} {where}".strip())
        keep = [i for i, name in enumerate(columns) if name != "status"]
        columns = tuple(columns[i] for i in keep)
        rows = [tuple(row[i] for i in keep) for row in rows]
    console().print(_table(title, columns, rows))


def count_entries(number: int, qualifier: str = "") -> str:
    """``1 active entry``, ``2 active entries`` (``qualifier``: the words before the noun)."""
    words = f"{qualifier} " if qualifier else ""
    return f"{number} {words}{'entry' if number == 1 else 'entries'}"


def paired_text(paired: Any, verdict: str) -> str:
    """One line on an entry's paired utility: the figures, the test and upkeep's verdict."""
    if paired.pairs == 0:
        return "not measured (skillrl skills measure)"
    return (
        f"{paired.utility:+.2f} success, {paired.score_delta:+.2f} score over {paired.pairs} "
        f"pairs ({paired.with_only} succeeded only with it, {paired.without_only} only without; "
        f"McNemar p={paired.p_value:.3f}): {verdict}"
    )


def print_entry(entry: Any, history: list[Any], verdict: str) -> None:
    """Print one entry in full (``verdict``: what upkeep makes of its paired utility)."""
    out = console()
    table = Table(title=literal(f"{entry.kind} {entry.id}"), show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    fields = ["title", "principle", "when_to_apply", "env", "category"]
    if entry.kind == "mistake":
        fields += ["failure_point", "flawed_action", "correction"]
    if entry.kind == "case":
        fields += ["offers"]
    fields += ["status", "revision", "source", "external_id", "support_count", "times_retrieved",
               "episodes_retrieved", "success_episodes", "failure_episodes", "created_at",
               "updated_at"]  # fmt: skip
    for name in fields:
        value = getattr(entry, name)
        table.add_row(name, literal(value))
    table.add_row("paired utility", literal(paired_text(entry.paired, verdict)))
    out.print(table)
    rows = [
        (p["created_at"], p["source"], p["author"], str(len(p["trajectory_ids"])),
         "" if p["similarity"] is None else f"{p['similarity']:.3f}", _short(p["reason"], 40))
        for p in entry.provenance
    ]  # fmt: skip
    columns = ("when", "source", "author", "trajectories", "similarity", "reason")
    out.print(_table("provenance", columns, rows))
    print_history(history)


def print_history(revisions: list[Any]) -> None:
    """Print one row per revision."""
    rows = [
        (str(r.revision), r.created_at, r.author, r.data.get("status", ""),
         _short(r.data.get("title"), 40), _short(r.reason, 40))
        for r in revisions
    ]  # fmt: skip
    columns = ("rev", "when", "author", "status", "title", "reason")
    console().print(_table("revisions", columns, rows))


def print_retrieved(result: Any) -> None:
    """Print what retrieval returned, per kind."""
    rows = [
        (kind, f"{r.similarity:.3f}", r.entry.id[:SHORT_ID], _short(r.entry.title))
        for kind in ("general", "task", "mistakes", "cases")
        for r in getattr(result, kind)
    ]
    console().print(_table("retrieval", ("kind", "similarity", "id", "title"), rows))


def print_snapshots(infos: list[Any]) -> None:
    """Print one row per snapshot."""
    table = Table(title="snapshots")
    for column in ("name", "created", "entries"):
        table.add_column(column)
    for i in infos:
        table.add_row(literal(i.name), literal(i.created_at), str(i.entries))
    console().print(table)


def print_diff(result: Any) -> None:
    """Print the added, removed and changed entries between two snapshots."""
    out = console()
    if result.empty:
        out.print(literal(f"no differences between {result.a} and {result.b}"))
        return
    added, removed = Text("added", style="green"), Text("removed", style="red")
    rows: list[tuple[Cell, ...]] = [
        (added, e["id"][:SHORT_ID], _short(e["title"]), "") for e in result.added
    ]
    rows += [(removed, e["id"][:SHORT_ID], _short(e["title"]), "") for e in result.removed]
    for c in result.changed:
        detail = "; ".join(f"{k}: {_short(str(a), 30)} -> {_short(str(b), 30)}"
                           for k, (a, b) in c.fields.items())  # fmt: skip
        changed = Text("changed", style="yellow")
        rows.append((changed, c.entry_id[:SHORT_ID], _short(c.title), detail))
    out.print(_table(f"{result.a} -> {result.b}", ("change", "id", "title", "fields"), rows))


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
        cats.add_row(literal(row["env"]), literal(row["category"]), str(row["active"]))
    out.print(cats)
    ep = summary["episodes"]
    out.print(
        f"episodes: {ep['total']} ({ep['successes']} successful, {ep['distilled']} distilled)"
    )
    index = summary["index"]
    state = "[green]in agreement[/]" if index["ok"] else "[red]DISAGREES: run reindex[/]"
    vectors = "vector" if index["indexed"] == 1 else "vectors"
    out.print(f"index ({summary['embedder']}): {index['indexed']} {vectors} for "
              f"{count_entries(index['sql_active'], 'active')}, {state}")  # fmt: skip
    out.print(f"snapshots: {summary['snapshots']}")


def print_import_plan(plan: Any, path: Any) -> None:
    """Show an import's dry run: one row per record (what would happen, and why), then totals."""
    out = console()
    table = Table(title=literal(f"import {path} (dry run: nothing written)"), show_lines=False)
    for column in ("record", "title", "would be", "detail"):
        table.add_column(column, overflow="fold")
    styles = {"add": "green", "merge": "cyan", "refuse": "red"}
    words = {"add": "added", "merge": "merged", "refuse": "refused"}
    for r in plan.records:
        detail = r.reason
        if r.outcome == "merge":
            into = r.into[:SHORT_ID] if r.into else f"record {r.into_record}"
            detail = f"into {into} (similarity {r.similarity:.3f})"
        table.add_row(
            literal(r.where), literal(r.title), Text(words[r.outcome], style=styles[r.outcome]),
            literal(detail),
        )  # fmt: skip
    out.print(table)
    out.print(
        f"{len(plan.records)} records: {plan.count('add')} would be added, "
        f"{plan.count('merge')} merged, {plan.count('refuse')} refused"
    )
