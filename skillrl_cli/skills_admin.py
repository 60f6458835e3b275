"""``skillrl skills`` commands over the whole bank: import, export, snapshots, stats, reindex."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from envs.registry import DEFAULT_ENV
from skillrl_cli.options import json_option
from skillrl_cli.skills_options import author_option, bank_options
from skillrl_cli.skills_view import (
    console,
    count_entries,
    literal,
    print_diff,
    print_import_plan,
    print_json,
    print_snapshots,
    print_stats,
)

ADMIN_COMMANDS: list[click.Command] = []


def _format(path: Path, fmt: str | None) -> str:
    if fmt:
        return fmt
    return "jsonl" if path.suffix == ".jsonl" else "skillrl"


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "skillrl"]),
    default=None,
    help="jsonl: full records of an export; skillrl: SkillRL's bank JSON. Default: by suffix.",
)
@click.option("--env", default=DEFAULT_ENV, show_default=True, help="skillrl format: env of it.")
@click.option(
    "--category-map",
    "category_map",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="skillrl format: YAML mapping 'skillrl_category: env_category' used instead of the "
    "env's default table (e.g. apparel: fashion).",
)
@click.option(
    "--map-category",
    "map_category",
    multiple=True,
    metavar="OLD=NEW",
    help="skillrl format: map SkillRL category OLD to NEW (repeatable; added to the table).",
)
@author_option("Who imports.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Check the whole file and show what would be added, merged into which entry, or "
    "refused and why, writing nothing (the bank is opened read-only). Exits 1 when a record "
    "is refused: the import would then refuse the whole file.",
)
@json_option
@bank_options(changes=True)
def import_command(bank: Any, file: Path, fmt: str | None, env: str, category_map: Path | None,
                   map_category: tuple[str, ...], author: str, dry_run: bool,
                   as_json: bool) -> None:  # fmt: skip
    """Import entries from FILE, all or nothing (a bad record is reported, nothing written).

    SkillRL task skills are filed under the env's categories through a table (the env's default,
    --category-map, --map-category); each keeps its SkillRL category, which export restores.
    """
    from memory import jsonl_format, skillrl_format
    from skillrl_cli.category_maps import category_map_for

    table: dict[str, str] = {}
    if _format(file, fmt) != "jsonl":
        table = category_map_for(env, category_map, map_category)
    if dry_run:
        _dry_run(bank, file, _format(file, fmt), env, table, as_json)
        return
    if _format(file, fmt) == "jsonl":
        report = jsonl_format.import_jsonl(bank, file, author=author)
    else:
        report = skillrl_format.import_skillrl(
            bank, file, env=env, author=author, category_map=table
        )
    if as_json:
        print_json({**dataclasses.asdict(report), "category_map": table})
    else:
        console().print(
            f"read {report.records} records: {len(report.added)} added, "
            f"{len(report.merged)} merged into existing entries"
        )
        if table:
            pairs = ", ".join(f"{old} -> {new}" for old, new in sorted(table.items()))
            console().print(literal(f"SkillRL categories mapped for {env}: {pairs}"))


def _dry_run(
    bank: Any, file: Path, fmt: str, env: str, table: dict[str, str], as_json: bool
) -> None:
    from memory import import_plan

    if fmt == "jsonl":
        plan = import_plan.plan_jsonl(bank, file)
    else:
        plan = import_plan.plan_skillrl(bank, file, env=env, category_map=table)
    if as_json:
        print_json({**dataclasses.asdict(plan), "category_map": table})
    else:
        print_import_plan(plan, file)
    if plan.refused:
        raise click.ClickException(
            f"{plan.count('refuse')} of {len(plan.records)} records of {file} would be refused, "
            "so the import would write nothing; fix them and run it again"
        )


@click.command("export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "skillrl"]),
    default=None,
    help="jsonl: full records (all statuses); skillrl: SkillRL's bank JSON (active). "
    "Default: by suffix.",
)
@click.option("--env", default=None, help="skillrl format: only this env's task skills/notes.")
@json_option
@bank_options()
def export(bank: Any, file: Path, fmt: str | None, env: str | None, as_json: bool) -> None:
    """Export the bank to FILE (written atomically)."""
    from memory import jsonl_format, skillrl_format

    chosen = _format(file, fmt)
    if chosen == "jsonl":
        count = jsonl_format.export_jsonl(bank, file)
    else:
        count = skillrl_format.export_skillrl(bank, file, env=env)
    if as_json:
        print_json({"file": str(file), "format": chosen, "entries": count})
    else:
        console().print(literal(f"wrote {count_entries(count)} to {file} ({chosen})"))


@click.command("snapshot")
@click.argument("name")
@json_option
@bank_options(changes=True)
def snapshot(bank: Any, name: str, as_json: bool) -> None:
    """Save the bank's current entries as snapshot NAME."""
    info = bank.snapshots.create(name)
    if as_json:
        print_json(dataclasses.asdict(info))
    else:
        console().print(f"snapshot [bold]{info.name}[/]: {count_entries(info.entries)}")


@click.command("snapshots")
@json_option
@bank_options()
def snapshots(bank: Any, as_json: bool) -> None:
    """List the saved snapshots."""
    infos = bank.snapshots.list()
    if as_json:
        print_json([dataclasses.asdict(i) for i in infos])
    else:
        print_snapshots(infos)


@click.command("diff")
@click.argument("a")
@click.argument("b", default="current")
@json_option
@bank_options()
def diff(bank: Any, a: str, b: str, as_json: bool) -> None:
    """Show what changed from snapshot A to snapshot B (default: the current bank)."""
    result = bank.snapshots.diff(a, b)
    if as_json:
        print_json(dataclasses.asdict(result))
    else:
        print_diff(result)


@click.command("stats")
@json_option
@bank_options()
def stats(bank: Any, as_json: bool) -> None:
    """Summarise the bank: entries per kind and status, episodes, index agreement."""
    from memory.summary import bank_summary

    summary = bank_summary(bank)
    if as_json:
        print_json(summary)
    else:
        print_stats(summary)


@click.command("reindex")
@json_option
@bank_options(changes=True, verify=False)
def reindex(bank: Any, as_json: bool) -> None:
    """Rebuild the vector index from SQL (also after switching --embedder)."""
    count = bank.reindex()
    if as_json:
        print_json({"indexed": count, "embedder": bank.config.embedder})
    else:
        console().print(f"indexed {count_entries(count, 'active')} with {bank.config.embedder}")


ADMIN_COMMANDS += [import_command, export, snapshot, snapshots, diff, stats, reindex]
