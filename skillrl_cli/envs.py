"""``skillrl envs``: list the registered environments."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from envs.registry import registered
from skillrl_cli.options import json_option


@click.command("envs")
@json_option
def envs(as_json: bool) -> None:
    """List the environments that skillrl run --env accepts (id and description)."""
    found = registered()
    if as_json:
        click.echo(json.dumps([{"id": k, "description": v} for k, v in found.items()], indent=2))
        return
    table = Table(title="Environments")
    table.add_column("id", style="bold cyan")
    table.add_column("description")
    for env_id, description in found.items():
        table.add_row(env_id, description)
    Console().print(table)
