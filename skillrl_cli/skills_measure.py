"""``skillrl skills measure``: what entries are worth, by paired rollouts of the workspace's model.

Each goal is played with the bank as it is, then once more per entry that rollout retrieved,
with that entry withheld (same goal, same seed, greedy decoding); the figures are added to the
entries' paired utility, which ``skillrl skills show`` prints and bank upkeep judges by
(:mod:`skillrl.distill.paired_utility`). The model is built as ``skillrl run`` builds it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import click
from rich.console import Console

from envs.registry import DEFAULT_ENV
from skillrl.prompts import PromptConfig
from skillrl_cli.config_options import OptionGroup, build, config_options
from skillrl_cli.options import (
    PlayedModel,
    env_config_from,
    env_option,
    json_option,
    settle_played_model,
)
from skillrl_cli.skills_options import bank_options
from skillrl_cli.skills_view import SHORT_ID, literal, print_json
from skillrl_cli.upfront_checks import goal_range
from skillrl_core.episode_limits import max_turns_option
from skillrl_core.errors import ConfigError
from skillrl_core.goal_range import FORMS
from skillrl_core.option_fields import SEED_MAX, option
from skillrl_core.splits import TEST_SPLIT, TRAIN_SPLIT


@dataclass(frozen=True)
class MeasureChoices:
    """Which entries ``skillrl skills measure`` measures, on which goals, and what it stores."""

    env_id: str = option(DEFAULT_ENV, help="Environment whose goals play.", aliases=("--env",))
    split: str = option(
        TRAIN_SPLIT,
        help="Split of the goals (training goals by default: what the agent is tested on must "
        "not decide what the bank keeps).",
    )
    goals: str = option(
        "20",
        help=f"Goals of the split to play: {FORMS}. Each costs one rollout with the bank plus "
        "one per entry that rollout retrieved.",
        metavar="N|FIRST-LAST",
    )
    entries: tuple[str, ...] = option(
        (),
        help="Entry to measure (its id or a unique prefix of 6+ characters), repeatable. "
        "Default: every entry the goals' rollouts retrieve. Only goals whose rollout retrieved "
        "an entry measure it.",
        aliases=("--entry",),
        metavar="ID",
        show_default=False,
    )
    seed: int = option(
        0,
        help="Seed of the first goal (goal i plays seed+i); both rollouts of a pair share it.",
        low=0,
        high=SEED_MAX,
    )
    max_turns: int = max_turns_option()
    parallel: int = option(16, help="Episodes played at once.", low=1)
    dry_run: bool = option(
        False,
        help="Play and print the figures, store nothing (the bank is opened read-only).",
        show_default=False,
    )


CHOICES = OptionGroup(MeasureChoices)
MODEL_OPTIONS = OptionGroup(PlayedModel)
PROMPT_OPTIONS = OptionGroup(PromptConfig)


@click.command("measure")
@config_options(CHOICES, MODEL_OPTIONS, PROMPT_OPTIONS)
@env_option
@json_option
@bank_options(changes=True, check_first=lambda values: _check_options(values))
def measure(bank: Any, as_json: bool, **values: Any) -> None:
    """Measure entries by paired rollouts: each goal with the entry and with it withheld.

    The model decodes greedily, so the two rollouts of a pair differ by the entry alone. The
    rollouts are not stored and change no usage statistics; unless --dry-run, each measured
    entry's pairs are added to its paired utility (see `skillrl skills show ID`), by which
    bank upkeep retires entries that do not help.
    """
    from skillrl.distill.paired_utility import PairedUtilityConfig, measure_paired_utility
    from skillrl_cli.run import model_agent, model_play

    choices, played = build(CHOICES, values), build(MODEL_OPTIONS, values)
    prompt, env_options = build(PROMPT_OPTIONS, values), values["env_options"]
    console = Console(stderr=as_json)
    workspace = str(bank.config.workspace)  # bank_options took --workspace
    # Checked before any model loads: a typo fails in a second.
    env_config = env_config_from(choices.env_id, env_options)
    goals = goal_range(choices.env_id, env_config, choices.split, choices.goals)
    wanted = frozenset(bank.resolve_id(text) for text in choices.entries)
    settled = settle_played_model(
        played,
        prompt,
        click.get_current_context(),
        console,
        env_id=choices.env_id,
        workspace=workspace,
        env_options=env_options,
    )
    played, prompt, env_config = settled.played, settled.prompt, settled.env_config
    # Against the split as the model's settings make it (they may shrink it, as eval checks).
    goals = goal_range(choices.env_id, env_config, choices.split, choices.goals)
    if settled.skills is False:
        console.print(
            "[yellow]the model was trained without skills; measuring what entries are "
            "worth to it with skills anyway[/]"
        )
    # Greedy: the two rollouts of a pair differ by the entry alone.
    play = model_play(choices.env_id, played, prompt, workspace, temperature=0.0, seed=choices.seed)
    agent = model_agent(play, console, True)
    config = PairedUtilityConfig(
        entry_ids=wanted,
        max_turns=choices.max_turns,
        max_parallel=choices.parallel,
        record=not choices.dry_run,
    )
    with console.status(f"playing {goals.count} goals with and without their entries"):
        starts = _measured_starts(choices, env_config, goals)
        report = measure_paired_utility(agent, bank, starts, config)
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
    _print(console, bank, report, choices.dry_run)


def _check_options(values: dict[str, Any]) -> None:
    """Refuse the test split and bad --goals/--entry text before the bank is opened."""
    from memory.entries import check_entry_id

    choices = build(CHOICES, values)
    if choices.split == TEST_SPLIT and not choices.dry_run:
        raise ConfigError(
            f"--split {TEST_SPLIT!r}: the paired figures measured here decide which entries bank "
            "upkeep retires, and held-out goals must never decide what the bank keeps; measure "
            f"on {TRAIN_SPLIT!r} goals (or look only, with --dry-run)"
        )
    env_config = env_config_from(choices.env_id, values["env_options"])
    goal_range(choices.env_id, env_config, choices.split, choices.goals)
    for text in choices.entries:
        check_entry_id(text, option="--entry")


def _measured_starts(choices: MeasureChoices, env_config: dict[str, Any], goals: Any) -> list[Any]:
    from skillrl.rollout import EpisodeStart

    return [
        EpisodeStart(
            choices.env_id,
            choices.split,
            goal_index=goal,
            seed=choices.seed + i,
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
