"""``skillrl eval``: success, score, turns, validity, tokens, Pass@(K,T) and timings of a policy.

Evaluates a model (by default the one ``--model auto`` picks: see
:data:`skillrl_cli.options.AUTO_MODEL_ORDER`) with the workspace's skill bank, with skills,
without, or both, and prints one table of figures, one Pass@(K,T) table per setting and a timing
table.
"""

from __future__ import annotations

import json
from typing import Any

import click

from envs.registry import DEFAULT_ENV
from skillrl.policies.config import DTYPES
from skillrl_cli.bank_access import open_bank
from skillrl_cli.options import (
    AUTO_MODEL,
    MODEL_HELP,
    SEED,
    backend_option,
    constrained_from,
    decoding_line,
    decoding_option,
    env_config_from,
    env_option,
    json_option,
    max_new_tokens_option,
    max_prompt_tokens_option,
    max_turns_option,
    model_settings_for,
    policy_config_from,
    prompt_config_from,
    resolve_model,
    workspace_option,
)
from skillrl_cli.upfront_checks import check_prompt_budget, goal_range
from skillrl_core.goal_range import FORMS
from skillrl_core.splits import TEST_SPLIT
from trainers.evaluate import EVAL_DTYPE

SKILL_MODES: dict[str, tuple[bool, ...]] = {"both": (True, False), "on": (True,), "off": (False,)}
"""``--skills`` choices and the settings each evaluates (skills on, off), in order."""
UNRECORDED_SKILL_MODE = "both"
"""What an unset ``--skills`` evaluates when the model records no settings."""


def skill_modes(chosen: str | None) -> tuple[bool, ...]:
    """Return the settings to evaluate for ``--skills`` after the model's settings applied."""
    return SKILL_MODES[chosen or UNRECORDED_SKILL_MODE]


def _int_list(_ctx: Any, _param: Any, value: str) -> tuple[int, ...]:
    try:
        numbers = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError as error:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of integers") from error
    if not numbers:
        raise click.BadParameter("give at least one number")
    return numbers


@click.command("eval")
@click.option("--env", "env_id", default=DEFAULT_ENV, show_default=True, help="Environment id.")
@click.option("--split", default=TEST_SPLIT, show_default=True, help="Split of the goals.")
@click.option(
    "--goals",
    "goals_text",
    default="20",
    show_default=True,
    metavar="N|FIRST-LAST",
    help=f"Goals of the split to evaluate: {FORMS}.",
)
@click.option("--model", default=AUTO_MODEL, show_default=True, help=MODEL_HELP)
@backend_option
@click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default=EVAL_DTYPE,
    show_default=True,
    help="Number format of the transformers policy. Evaluation plays float32 unless told "
    "otherwise: in bf16 the batch a prompt is padded into moved greedy actions, so a figure "
    "could change with the batch size alone; in float32 it does not. auto: bf16 on GPUs and "
    "on CPUs with native bf16, else float32 (faster, not batch-invariant).",
)
@click.option("--base-url", default=None, help="Server URL for --backend openai.")
@click.option(
    "--skills",
    "skills_mode",
    type=click.Choice(list(SKILL_MODES)),
    default=None,
    help="Evaluate with skills, without, or both. Default: as the model was trained (on or off, "
    f"from its recorded settings), else {UNRECORDED_SKILL_MODE}.",
)
@click.option(
    "--samples",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Sampled episodes per goal for Pass@(K,T) (1: the greedy episode).",
)
@click.option(
    "--temperature",
    type=click.FloatRange(0),
    default=0.7,
    show_default=True,
    help="Sampling temperature of those episodes.",
)
@click.option(
    "--k",
    "ks",
    default="1",
    show_default=True,
    callback=_int_list,
    help="K values of Pass@(K,T), comma-separated (each <= --samples).",
)
@click.option(
    "--t",
    "ts",
    default="5,10,15",
    show_default=True,
    callback=_int_list,
    help="T values (turn budgets) of Pass@(K,T), comma-separated.",
)
@max_turns_option
@max_new_tokens_option
@max_prompt_tokens_option
@decoding_option
@click.option("--threads", type=click.IntRange(1), default=None, help="CPU threads for torch.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Env and sampling seed.")
@env_option
@workspace_option
@json_option
def eval_command(**o: Any) -> None:
    """Evaluate a model and bank: success, score, turns, Pass@(K,T), timings.

    Without --model, the model that --model auto names (see --model below) is evaluated; the
    command says which.
    """
    from rich.console import Console

    from trainers.evaluate import EvalConfig, evaluate
    from trainers.policy_rollouts import PolicyRollouts

    # Every setting is checked before any model loads: a typo fails in seconds.
    env_config = env_config_from(o["env_id"], o["env_options"])
    goals = goal_range(o["env_id"], env_config, o["split"], o["goals_text"])
    console = Console(stderr=o["as_json"])
    o["model"] = resolve_model(o["model"], o["backend"], o["workspace"], console, o["env_id"])
    if model_settings_for(o["model"], o, click.get_current_context(), console, "skills_mode"):
        env_config = env_config_from(o["env_id"], o["env_options"])
    o["constrained"] = constrained_from(o)  # an impossible choice is refused before loading
    check_prompt_budget(o["env_id"], o["max_prompt_tokens"])  # as the model's settings say
    modes = skill_modes(o["skills_mode"])
    config = EvalConfig(
        split=o["split"],
        goals=goals,
        samples=o["samples"],
        temperature=o["temperature"],
        ks=o["ks"],
        ts=o["ts"],
        seed=o["seed"],
    )
    console.print(decoding_line(o["constrained"]))
    from skillrl.policies import load_policy

    policy = load_policy(policy_config_from(o))
    bank = open_bank(o["workspace"], o["env_id"]) if True in modes else None
    results = []
    try:
        for skills in modes:
            runner = PolicyRollouts(
                policy,
                env_id=o["env_id"],
                bank=bank if skills else None,
                env_config=env_config,
                max_turns=o["max_turns"],
                max_new_tokens=o["max_new_tokens"],
                constrained=o["constrained"],
                prompt_config=prompt_config_from(o),
                count_retrievals=False,
                # Only measured, never trained on: sampled (Pass@K) turns get the same query
                # repair as greedy ones.
                repair_queries=True,
            )
            with console.status(f"evaluating {'with' if skills else 'without'} skills"):
                results.append(evaluate(runner, config))
    finally:
        if bank is not None:
            bank.close()
    if o["as_json"]:
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
