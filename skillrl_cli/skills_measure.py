"""``skillrl skills measure``: what entries are worth, by paired rollouts of the workspace's model.

Each goal is played with the bank as it is, then once more per entry that rollout retrieved,
with that entry withheld (same goal, same seed, greedy decoding); the figures are added to the
entries' paired utility, which ``skillrl skills show`` prints and bank upkeep judges by
(:mod:`skillrl.distill.paired_utility`). The model is built as ``skillrl run`` builds it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import click
from rich.console import Console

from envs.registry import DEFAULT_ENV
from skillrl_cli.options import (
    AUTO_MODEL,
    MODEL_HELP,
    SEED,
    backend_option,
    decoding_option,
    dtype_option,
    env_config_from,
    env_option,
    json_option,
    max_prompt_tokens_option,
    max_turns_option,
    model_settings_for,
    resolve_model,
)
from skillrl_cli.skills_options import bank_options
from skillrl_cli.skills_view import SHORT_ID, literal, print_json
from skillrl_cli.upfront_checks import goal_range
from skillrl_core.errors import ConfigError
from skillrl_core.goal_range import FORMS
from skillrl_core.splits import TEST_SPLIT, TRAIN_SPLIT


@click.command("measure")
@click.option(
    "--env", "env_id", default=DEFAULT_ENV, show_default=True, help="Environment whose goals play."
)
@click.option(
    "--split",
    default=TRAIN_SPLIT,
    show_default=True,
    help="Split of the goals (training goals by default: what the agent is tested on must not "
    "decide what the bank keeps).",
)
@click.option(
    "--goals",
    "goals_text",
    default="20",
    show_default=True,
    metavar="N|FIRST-LAST",
    help=f"Goals of the split to play: {FORMS}. Each costs one rollout with the bank plus one "
    "per entry that rollout retrieved.",
)
@click.option(
    "--entry",
    "entries",
    multiple=True,
    metavar="ID",
    help="Entry to measure (its id or a unique prefix of 6+ characters), repeatable. Default: "
    "every entry the goals' rollouts retrieve. Only goals whose rollout retrieved an entry "
    "measure it.",
)
@click.option(
    "--seed",
    type=SEED,
    default=0,
    show_default=True,
    help="Seed of the first goal (goal i plays seed+i); both rollouts of a pair share it.",
)
@click.option("--model", default=AUTO_MODEL, show_default=True, help=MODEL_HELP)
@backend_option
@dtype_option
@click.option(
    "--base-url", default=None, help="Server root for --backend openai (e.g. http://host:8000/v1)."
)
@decoding_option
@max_turns_option
@max_prompt_tokens_option
@click.option(
    "--parallel",
    type=click.IntRange(1),
    default=16,
    show_default=True,
    help="Episodes played at once.",
)
@click.option("--threads", type=click.IntRange(1), default=None, help="CPU threads for torch.")
@env_option
@click.option(
    "--dry-run",
    is_flag=True,
    help="Play and print the figures, store nothing (the bank is opened read-only).",
)
@json_option
@bank_options(changes=True, check_first=lambda kw: _check_options(kw))
def measure(bank: Any, entries: tuple[str, ...], dry_run: bool, as_json: bool, **o: Any) -> None:
    """Measure entries by paired rollouts: each goal with the entry and with it withheld.

    The model decodes greedily, so the two rollouts of a pair differ by the entry alone. The
    rollouts are not stored and change no usage statistics; unless --dry-run, each measured
    entry's pairs are added to its paired utility (see `skillrl skills show ID`), by which
    bank upkeep retires entries that do not help.
    """
    from skillrl.distill.paired_utility import PairedUtilityConfig, measure_paired_utility
    from skillrl_cli.run import model_agent, model_play

    console = Console(stderr=as_json)
    o["workspace"] = str(bank.config.workspace)  # bank_options took --workspace
    # Checked before any model loads: a typo fails in a second.
    env_config = env_config_from(o["env_id"], o["env_options"])
    goals = goal_range(o["env_id"], env_config, o["split"], o["goals_text"])
    wanted = frozenset(bank.resolve_id(text) for text in entries)
    o["model"] = resolve_model(o["model"], o["backend"], o["workspace"], console, o["env_id"])
    settings = model_settings_for(o["model"], o, click.get_current_context(), console, "skills")
    if settings is not None:
        env_config = env_config_from(o["env_id"], o["env_options"])
        if not settings.skills:
            console.print(
                "[yellow]the model was trained without skills; measuring what entries are "
                "worth to it with skills anyway[/]"
            )
    # Greedy: the two rollouts of a pair differ by the entry alone.
    agent = model_agent(model_play(o, temperature=0.0, seed=o["seed"]), console, True)
    config = PairedUtilityConfig(
        entry_ids=wanted,
        max_turns=o["max_turns"],
        max_parallel=o["parallel"],
        record=not dry_run,
    )
    with console.status(f"playing {goals.count} goals with and without their entries"):
        report = measure_paired_utility(agent, bank, _measured_starts(o, env_config, goals), config)
    if as_json:
        print_json(
            {
                **dataclasses.asdict(report),
                "measured": {
                    entry_id: _figures(evidence, report.stored.get(entry_id))
                    for entry_id, evidence in report.evidence.items()
                },
            }
        )
        return
    _print(console, bank, report, dry_run)


def _check_options(kw: dict[str, Any]) -> None:
    """Refuse the test split and bad --goals/--entry text before the bank is opened."""
    from memory.entries import check_entry_id

    if kw["split"] == TEST_SPLIT and not kw["dry_run"]:
        raise ConfigError(
            f"--split {TEST_SPLIT!r}: the paired figures measured here decide which entries bank "
            "upkeep retires, and held-out goals must never decide what the bank keeps; measure "
            f"on {TRAIN_SPLIT!r} goals (or look only, with --dry-run)"
        )
    env_config = env_config_from(kw["env_id"], kw["env_options"])
    goal_range(kw["env_id"], env_config, kw["split"], kw["goals_text"])
    for text in kw["entries"]:
        check_entry_id(text, option="--entry")


def _measured_starts(o: dict[str, Any], env_config: dict[str, Any], goals: Any) -> list[Any]:
    from envs.registry import config_fields
    from skillrl.rollout import EpisodeStart

    env_config = dict(env_config)
    if "max_turns" in config_fields(o["env_id"]) and "max_turns" not in env_config:
        env_config["max_turns"] = o["max_turns"]
    return [
        EpisodeStart(
            o["env_id"],
            o["split"],
            goal_index=goal,
            seed=o["seed"] + i,
            env_config=env_config,
        )
        for i, goal in enumerate(goals.indices())
    ]


def _figures(evidence: Any, stored: Any) -> dict[str, Any]:
    from skillrl.distill.upkeep import UpkeepConfig, paired_verdict

    total = stored if stored is not None else evidence
    return {
        "utility": evidence.utility,
        "score_delta": evidence.score_delta,
        "p_value": evidence.p_value,
        "stored_pairs": total.pairs,
        "stored_utility": total.utility,
        "verdict": paired_verdict(total, UpkeepConfig()),
    }


def _print(console: Console, bank: Any, report: Any, dry_run: bool) -> None:
    from rich.table import Table

    from skillrl.distill.upkeep import UpkeepConfig, paired_verdict

    titles = {e.id: e.title for e in bank.entries(sorted(report.evidence)).values()}
    table = Table(title=f"paired utility over {report.goals} goals ({report.rollouts} rollouts)")
    for column in ("id", "title", "pairs", "with only", "without only", "utility", "score", "p"):
        table.add_column(column, justify="left" if column in ("id", "title") else "right")
    table.add_column("all pairs so far" if not dry_run else "verdict")
    for entry_id, e in sorted(report.evidence.items(), key=lambda item: -item[1].utility):
        total = report.stored.get(entry_id, e)
        verdict = paired_verdict(total, UpkeepConfig())
        table.add_row(
            literal(entry_id[:SHORT_ID]),
            literal(titles.get(entry_id, "")),
            str(e.pairs),
            str(e.with_only),
            str(e.without_only),
            f"{e.utility:+.2f}",
            f"{e.score_delta:+.2f}",
            f"{e.p_value:.3f}",
            verdict if dry_run else f"{total.pairs} pairs, {total.utility:+.2f}: {verdict}",
        )
    console.print(table)
    if report.not_retrieved:
        shown = ", ".join(i[:SHORT_ID] for i in report.not_retrieved)
        console.print(f"[yellow]not retrieved on any of these goals, so not measured: {shown}[/]")
    if report.failed_episodes:
        console.print(
            f"[yellow]{report.failed_episodes} rollouts failed; their pairs are left out[/]"
        )
    if dry_run:
        console.print("[dim]dry run: nothing stored[/]")
