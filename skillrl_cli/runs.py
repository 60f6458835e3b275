"""``skillrl runs``: the training runs of a workspace, their progress and checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from skillrl_cli.options import json_option, workspace_option
from skillrl_core.errors import DataFileError


@click.command("runs")
@workspace_option
@json_option
def runs(workspace: str, as_json: bool) -> None:
    """List training runs of `skillrl train` and `skillrl sft`: progress, checkpoints, newest first.

    The checkpoint marked with * is what `skillrl run` and `skillrl eval` play by default
    (--model auto) for its environment: the checkpoint the most recently updated run trained on
    that environment leaves. That is the cycle it chose on its evaluation goals when those are
    not test goals (`train --eval-split eval`, marked "chosen"; none when no cycle beat the
    model it started from), else its last checkpoint.
    """
    from skillrl.workspace import resolve_workspace
    from trainers.runs import default_models_among, list_runs

    root = resolve_workspace(workspace)
    if not root.is_dir():  # a typo in --workspace must not read as "no runs yet"
        raise DataFileError(f"the workspace {root} does not exist (or is not a folder)")
    if (root / "runs").exists() and not (root / "runs").is_dir():  # not "no runs yet"
        raise DataFileError(
            f"{root / 'runs'} is a file, not the folder where training runs are kept; move it "
            "away (train and sft create the folder)"
        )
    found = list_runs(root)
    defaults = default_models_among(found)  # listed once: one warning per damaged run
    chosen = set(defaults.values())
    if as_json:
        rows = [{**r.to_dict(), "default_model": r.played_checkpoint in chosen} for r in found]
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.markup import escape

    from skillrl_core.text import visible

    console = Console()
    if not found:
        console.print(
            f"no training runs in {escape(str(root / 'runs'))} yet (start one with "
            "`skillrl sft --env <env>` or `skillrl train --env <env>`)"
        )
        return
    console.print(_table(found, chosen))
    for env_id, path in sorted(defaults.items()):
        env_shown = escape(visible(env_id))
        console.print(
            f"* default model of `skillrl run --env {env_shown}` / `skillrl eval --env "
            f"{env_shown}`: {escape(visible(str(path)))}",
            soft_wrap=True,
        )


def _table(found: list[Any], chosen: set[Path]) -> Any:
    from rich.table import Table
    from rich.text import Text

    from skillrl_core.text import visible
    from trainers.runs import SFT_RUN

    table = Table(title="Training runs (newest first)")
    columns = ("run", "env", "kind", "progress", "status", "best success", "last success")
    for column in (*columns, "checkpoints"):
        table.add_column(column, justify="right" if "success" in column else "left")
    for run in found:
        planned = "?" if run.cycles_planned is None else str(run.cycles_planned)
        unit = "rounds" if run.kind == SFT_RUN else "cycles"
        best = "-"
        if run.best_success is not None:
            best = f"{run.best_success:.2f} (cycle {run.best_cycle})"
        if run.chosen_cycle is not None:
            best += f", chosen (cycle {run.chosen_cycle})"
        last = "-" if run.last_success is None else f"{run.last_success:.2f}"
        marks = [f"{p}{' *' if p in chosen else ''}" for p in run.checkpoints]
        table.add_row(
            Text(visible(run.name)),
            Text(visible(run.env_id or "?")),
            run.kind,
            f"{run.cycles_completed}/{planned} {unit}",
            "done" if run.done else "unfinished",
            best,
            last,
            Text(visible("\n".join(marks) or "-")),
        )
    return table
