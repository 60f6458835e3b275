"""``skillrl runs``: the training runs of a workspace, their progress and checkpoints."""

from __future__ import annotations

import json
from typing import Any

import click

from skillrl_cli.options import json_option, workspace_option
from skillrl_core.errors import DataFileError


@click.command("runs")
@workspace_option
@json_option
def runs(workspace: str, as_json: bool) -> None:
    """List training runs: cycles completed, best success, checkpoints (newest run first).

    The run marked with * holds the checkpoint that `skillrl run` and `skillrl eval` use by
    default (--model auto): the last checkpoint of the most recently updated run.
    """
    from skillrl.workspace import resolve_workspace
    from trainers.runs import list_runs, newest_checkpoint

    root = resolve_workspace(workspace)
    if not root.is_dir():  # a typo in --workspace must not read as "no runs yet"
        raise DataFileError(f"the workspace {root} does not exist (or is not a folder)")
    found = list_runs(root)
    chosen = newest_checkpoint(found)
    default = chosen[1] if chosen else None
    if as_json:
        rows = [{**r.to_dict(), "default_model": r.last_checkpoint == default} for r in found]
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    if not found:
        console.print(
            f"no training runs in {escape(str(root / 'runs'))} yet (start one with `skillrl train`)"
        )
        return
    console.print(_table(found, default))
    if default is not None:
        console.print(f"* default model of `skillrl run` / `skillrl eval`: {escape(str(default))}")


def _table(found: list[Any], default: Any) -> Any:
    from rich.table import Table
    from rich.text import Text

    from skillrl_core.text import visible

    table = Table(title="Training runs (newest first)")
    for column in ("run", "cycles", "status", "best success", "last success", "checkpoints"):
        table.add_column(column, justify="right" if "success" in column else "left")
    for run in found:
        planned = "?" if run.cycles_planned is None else str(run.cycles_planned)
        best = "-"
        if run.best_success is not None:
            best = f"{run.best_success:.2f} (cycle {run.best_cycle})"
        last = "-" if run.last_success is None else f"{run.last_success:.2f}"
        marks = [f"{p}{' *' if p == default else ''}" for p in run.checkpoints]
        table.add_row(
            Text(visible(run.name)),
            f"{run.cycles_completed}/{planned}",
            "done" if run.done else "unfinished",
            best,
            last,
            Text(visible("\n".join(marks) or "-")),
        )
    return table
