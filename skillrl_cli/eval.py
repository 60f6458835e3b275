"""``skillrl eval``: success, score, turns, validity, tokens, Pass@(K,T) and timings of a policy.

Evaluates a model (by default the one ``--model auto`` picks: see
:data:`skillrl_cli.options.AUTO_MODEL_ORDER`) with the workspace's skill bank, with skills,
without, or both, and prints one table of figures, one Pass@(K,T) table per setting and a timing
table. While it plays, a terminal shows a progress bar; any other output (a log file, CI) gets a
plain progress line every half minute.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import click

from envs.registry import DEFAULT_ENV
from skillrl.prompts import PromptConfig
from skillrl_cli.bank_access import open_bank
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
from skillrl_core.goal_range import FORMS
from skillrl_core.option_fields import option
from trainers.evaluate import EVAL_DTYPE, EvalConfig

SKILL_MODES: dict[str, tuple[bool, ...]] = {"both": (True, False), "on": (True,), "off": (False,)}
"""``--skills`` choices and the settings each evaluates (skills on, off), in order."""
UNRECORDED_SKILL_MODE = "both"
"""What an unset ``--skills`` evaluates when the model records no settings."""


def skill_modes(chosen: str | None) -> tuple[bool, ...]:
    """Return the settings to evaluate for ``--skills`` after the model's settings applied."""
    return SKILL_MODES[chosen or UNRECORDED_SKILL_MODE]


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

    env_id: str = option(DEFAULT_ENV, help="Environment id.", aliases=("--env",))
    goals: str = option(
        "20", help=f"Goals of the split to evaluate: {FORMS}.", metavar="N|FIRST-LAST"
    )
    skills: str | None = option(
        None,
        help="Evaluate with skills, without, or both. Default: as the model was trained (on or "
        f"off, from its recorded settings), else {UNRECORDED_SKILL_MODE}.",
        choices=tuple(SKILL_MODES),
    )
    k: str = option(
        "1", help="K values of Pass@(K,T), comma-separated (each <= --samples).", metavar="K,..."
    )
    t: str = option(
        "5,10,15", help="T values (turn budgets) of Pass@(K,T), comma-separated.", metavar="T,..."
    )
    max_turns: int = option(15, help="Turn limit per episode.", low=1)
    max_new_tokens: int = option(48, help="Tokens the policy may generate per turn.", low=1)


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

    from skillrl_cli.train_session import PhaseBars
    from trainers.evaluate import evaluate
    from trainers.policy_rollouts import PolicyRollouts

    choices, played = build(CHOICES, values), build(MODEL_OPTIONS, values)
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
    played, prompt, taken = settle_played_model(
        played,
        prompt,
        click.get_current_context(),
        console,
        env_id=choices.env_id,
        workspace=workspace,
        env_options=env_options,
    )
    if taken is not None:
        if taken.skills is not None:
            choices = dataclasses.replace(choices, skills="on" if taken.skills else "off")
        env_config = env_config_from(choices.env_id, taken.env_options)
    # An impossible decoding is refused before loading.
    constrained = check_decoding(played.backend, played.constrained)
    check_prompt_budget(choices.env_id, prompt.max_prompt_tokens)  # as the model's settings say
    modes = skill_modes(choices.skills)
    console.print(decoding_line(constrained))
    from skillrl.policies import load_policy

    policy = load_policy(played.policy_config(workspace))
    bank = open_bank(workspace, choices.env_id) if True in modes else None
    results = []
    try:
        # A bar on a terminal; off one (a log file, CI) a plain line every interval.
        with PhaseBars(console, "evaluating (skill settings)", len(modes)) as bars:
            for skills in modes:
                runner = PolicyRollouts(
                    policy,
                    env_id=choices.env_id,
                    bank=bank if skills else None,
                    env_config=env_config,
                    max_turns=choices.max_turns,
                    max_new_tokens=choices.max_new_tokens,
                    constrained=constrained,
                    prompt_config=prompt,
                    count_retrievals=False,
                    # Only measured, never trained on: sampled (Pass@K) turns get the same
                    # query repair as greedy ones.
                    repair_queries=True,
                    on_progress=bars.show_rollout("  goals:"),
                )
                bars.phase(f"evaluating {'with' if skills else 'without'} skills")
                results.append(evaluate(runner, config))
                bars.advance()
    finally:
        if bank is not None:
            bank.close()
    if values["as_json"]:
        click.echo(json.dumps([r.to_dict() for r in results], indent=2, sort_keys=True))
        return
    _print(console, results, config)


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
            "on" if r.skills else "off",
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
        grid = Table(title=f"Pass@(K,T), skills {'on' if r.skills else 'off'}")
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
            "on" if r.skills else "off",
            *(f"{b[c]:.3f} / {t[c]:.3f}" for c in ("model", "env", "retrieval")),
        )
    console.print(timing)
