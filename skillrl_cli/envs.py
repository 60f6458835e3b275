"""``skillrl envs``: list the registered environments and where each comes from."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from envs.registry import listing
from skillrl_cli.options import json_option


@click.command("envs")
@json_option
def envs(as_json: bool) -> None:
    """List the environments --env accepts by id, with where each comes from.

    Built-in ones and the skillrl.envs entry points of installed packages; any other
    environment is named as package.module:SPEC.
    """
    found = listing()
    if as_json:
        rows = [
            {"id": e.spec.env_id, "description": e.spec.description, "source": e.source}
            for e in found
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="Environments")
    table.add_column("id", style="bold cyan")
    table.add_column("description")
    table.add_column("from", style="dim")
    for entry in found:
        table.add_row(entry.spec.env_id, entry.spec.description, entry.source)
    Console().print(table)
    Console().print("[dim]Your own: --env package.module:SPEC (docs/environments.md).[/]")
