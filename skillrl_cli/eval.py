"""``skillrl eval``: success, score, turns, validity, tokens, Pass@(K,T) and timings of a policy.

Evaluates a model (by default the one ``--model auto`` picks: see
:data:`skillrl_cli.options.AUTO_MODEL_ORDER`) with the workspace's skill bank in one or more
skills arms (its own entries, placebo entries retrieved for another goal, none), and prints one
table of figures, the arms compared goal by goal (won, lost, exact McNemar p), one Pass@(K,T)
table per arm and a timing table. ``--skills on,placebo`` asks, in one command, whether a bank
carries information: a policy that only reacts to an entry being there does as well with another
goal's entries as with its own.
While it plays, a terminal shows a progress bar; any other output (a log file, CI) gets a
plain progress line every half minute.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import click

from envs.registry import DEFAULT_ENV, ENV_HELP
from skillrl.prompts import PromptConfig
from skillrl_cli.config_options import OptionGroup, build, config_options
from skillrl_cli.options import (
    PlayedModel,
    check_decoding,
    decoding_line,
    env_config_from,
    env_option,
    json_option,
    settle_played_model,
    workspace_option,
)
from skillrl_cli.upfront_checks import check_prompt_budget, goal_range
from skillrl_core.episode_limits import max_turns_option
from skillrl_core.goal_range import FORMS
from skillrl_core.option_fields import option
from trainers.evaluate import EVAL_DTYPE, EvalConfig

SKILL_ARM_WORDS: dict[str, tuple[str, ...]] = {
    "on": ("on",),
    "placebo": ("placebo",),
    "off": ("off",),
    "both": ("on", "off"),
    "all": ("on", "placebo", "off"),
}
"""``--skills`` words and the arms each evaluates, in order (a comma-separated list of them plays
every arm named, the first being the baseline of the goal-by-goal comparisons)."""
UNRECORDED_SKILL_MODE = "both"
"""What an unset ``--skills`` evaluates when the model records no settings."""


def skill_arms(chosen: str | None) -> tuple[str, ...]:
    """Return the arms ``--skills`` names (after the model's settings applied), in order.

    Raises click's BadParameter naming the word that is not one of :data:`SKILL_ARM_WORDS`.
    """
    arms: list[str] = []
    words = [w.strip() for w in (chosen or UNRECORDED_SKILL_MODE).split(",")]
    for word in words:
        if word not in SKILL_ARM_WORDS:
            raise click.BadParameter(
                f"{word!r} is not one of {', '.join(SKILL_ARM_WORDS)} (or a comma-separated "
                "list of them, e.g. on,placebo,off)",
                param_hint="'--skills'",
            )
        arms += [a for a in SKILL_ARM_WORDS[word] if a not in arms]
    return tuple(arms)


def int_list(option_name: str, text: str) -> tuple[int, ...]:
    """Read a comma-separated list of integers (``--k 1,2,4``); a bad one is a usage error."""
    try:
        numbers = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as error:
        raise click.BadParameter(
            f"{text!r} is not a comma-separated list of integers", param_hint=option_name
        ) from error
    if not numbers:
        raise click.BadParameter("give at least one number", param_hint=option_name)
    return numbers


@dataclass(frozen=True)
class EvalChoices:
    """What ``skillrl eval`` plays besides :class:`EvalConfig`: the goals, skills and limits."""

    env_id: str = option(DEFAULT_ENV, help=ENV_HELP, aliases=("--env",))
    goals: str = option(
        "20", help=f"Goals of the split to evaluate: {FORMS}.", metavar="N|FIRST-LAST"
    )
    skills: str | None = option(
        None,
        help="Skills arms to evaluate, played on the same goals and compared goal by goal: on "
        "(the entries retrieved for the episode's own goal; also --skills alone), placebo (as "
        "many entries, retrieved for another training goal: does the bank carry information?), "
        "off (none; also --no-skills); both = on,off; all = on,placebo,off; or a comma-separated "
        "list, the first being the baseline of the comparisons. Default: as the model was "
        f"trained (on or off, from its recorded settings), else {UNRECORDED_SKILL_MODE}.",
        metavar="ARM[,ARM...]",
        words=("on", "off"),
    )
    k: str = option(
        "1", help="K values of Pass@(K,T), comma-separated (each <= --samples).", metavar="K,..."
    )
    t: str = option(
        "5,10,15", help="T values (turn budgets) of Pass@(K,T), comma-separated.", metavar="T,..."
    )
    max_turns: int = max_turns_option()


CHOICES = OptionGroup(EvalChoices)
EVAL_OPTIONS = OptionGroup(EvalConfig)
MODEL_OPTIONS = OptionGroup(
    PlayedModel,
    defaults={"dtype": EVAL_DTYPE},
    helps={
        "dtype": "Number format of the transformers policy. Evaluation plays float32 unless "
        "told otherwise: in bf16 the batch a prompt is padded into moved greedy actions, so a "
        "figure could change with the batch size alone; in float32 it does not. auto: bf16 on "
        "GPUs and on CPUs with native bf16, else float32 (faster, not batch-invariant)."
    },
)
PROMPT_OPTIONS = OptionGroup(PromptConfig)


@click.command("eval")
@config_options(CHOICES, EVAL_OPTIONS, MODEL_OPTIONS, PROMPT_OPTIONS)
@env_option
@workspace_option
@json_option
def eval_command(**values: Any) -> None:
    """Evaluate a model and bank: success, score, turns, Pass@(K,T), timings.

    Without --model, the model that --model auto names (see --model below) is evaluated; the
    command says which.
    """
    from rich.console import Console

    from skillrl_cli.library import EvalSettings, EvalWatch, evaluate_model
    from skillrl_cli.train_session import PhaseBars

    choices, played = build(CHOICES, values), build(MODEL_OPTIONS, values)
    if choices.skills is not None:
        skill_arms(choices.skills)  # a misspelt arm fails before anything is resolved or loaded
    prompt, workspace = build(PROMPT_OPTIONS, values), values["workspace"]
    # Every setting is checked before any model loads: a typo fails in seconds.
    env_options = values["env_options"]
    env_config = env_config_from(choices.env_id, env_options)
    goals = goal_range(choices.env_id, env_config, values["split"], choices.goals)
    config = build(
        EVAL_OPTIONS,
        values,
        goals=goals,
        ks=int_list("--k", choices.k),
        ts=int_list("--t", choices.t),
    )
    console = Console(stderr=values["as_json"])
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
    if settled.skills is not None and choices.skills is None:
        choices = dataclasses.replace(choices, skills="on" if settled.skills else "off")
    # The model's environment settings may shrink the split (Sokoban's categories): the goals
    # are checked again against the split they will be played from.
    goals = goal_range(choices.env_id, env_config, values["split"], choices.goals)
    config = dataclasses.replace(config, goals=goals)
    # An impossible decoding is refused before loading.
    constrained = check_decoding(played.backend, played.constrained)
    check_prompt_budget(choices.env_id, prompt.max_prompt_tokens)  # as the model's settings say
    arms = skill_arms(choices.skills)
    console.print(decoding_line(constrained))
    settings = EvalSettings(
        policy=played.policy_config(workspace),
        config=config,
        env_id=choices.env_id,
        env_config=env_config,
        arms=arms,
        max_turns=choices.max_turns,
        max_new_tokens=played.max_new_tokens,
        constrained=constrained,
        prompt=prompt,
    )
    # A bar on a terminal; off one (a log file, CI) a plain line every interval.
    with PhaseBars(console, "evaluating (skills arms)", len(arms)) as bars:
        watch = EvalWatch(
            arm_started=lambda arm: bars.phase(f"evaluating skills arm {arm!r}"),
            arm_ended=lambda _result: bars.advance(),
            rollout=bars.show_rollout("  goals:"),
        )
        report = evaluate_model(settings, watch=watch)
    if values["as_json"]:
        click.echo(json.dumps(report.to_dict(), indent=2, sort_keys=True))
        return
    _print(console, report.arms, config)
    if report.comparisons:
        _print_comparisons(console, report.comparisons)


def _print_comparisons(console: Any, comparisons: list[Any]) -> None:
    from rich.table import Table

    table = Table(title="goal by goal (exact McNemar on the goals one arm solved alone)")
    for column in ("arms", "success", "won / lost", "McNemar p", "score difference", ""):
        table.add_column(column, justify="right")
    for c in comparisons:
        table.add_row(
            f"{c.baseline} -> {c.other}",
            f"{c.baseline_successes} -> {c.other_successes}",
            f"{c.won} / {c.lost}",
            f"{c.p_value:.3g}",
            f"{c.score_difference:+.3f}",
            "resolved" if c.resolved else "not resolved",
        )
    console.print(table)


def _print(console: Any, results: list[Any], config: Any) -> None:
    from rich.table import Table

    goals = config.goals
    table = Table(title=f"{goals.count} goals ({goals}) of split {config.split!r} (greedy)")
    for column in (
        "skills",
        "success",
        "95% interval",
        "score",
        "turns",
        "invalid",
        "tokens/episode",
        "seconds",
    ):
        table.add_column(column, justify="right")
    for r in results:
        g = r.greedy
        low, high = g.success_interval
        table.add_row(
            r.arm,
            f"{g.successes}/{g.episodes}",
            f"[{low:.2f}, {high:.2f}]",
            f"{g.mean_score:.3f}",
            f"{g.mean_turns:.1f}",
            f"{g.invalid_action_rate:.2f}",
            f"{g.tokens_per_episode:.0f}",
            f"{r.seconds:.0f}",
        )
    console.print(table)
    for r in results:
        grid = Table(title=f"Pass@(K,T), skills {r.arm}")
        grid.add_column("K \\ T")
        ts = sorted({int(key.split(",")[1]) for key in r.pass_at})
        ks = sorted({int(key.split(",")[0]) for key in r.pass_at})
        for t in ts:
            grid.add_column(f"T={t}", justify="right")
        for k in ks:
            grid.add_row(f"K={k}", *(f"{r.pass_at[f'{k},{t}']:.2f}" for t in ts))
        console.print(grid)
    timing = Table(title="seconds per batched turn / per episode turn")
    for column in ("skills", "model", "env", "retrieval"):
        timing.add_column(column, justify="right")
    for r in results:
        b, t = r.timings["per_batch"], r.timings["per_turn"]
        timing.add_row(
            r.arm,
            *(f"{b[c]:.3f} / {t[c]:.3f}" for c in ("model", "env", "retrieval")),
        )
    console.print(timing)
