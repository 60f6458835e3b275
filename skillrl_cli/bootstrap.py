"""``skillrl bootstrap``: seed a skill bank from expert (or teacher-model) episodes.

Plays training goals, records them in the workspace bank, distills them and tidies the bank;
``--export`` writes the active entries as a starting bank, which is how the shipped
``skillrl/distill/data/webshop_starting_bank.json`` is made (its ``regenerate`` field has the
exact command).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from envs.registry import DEFAULT_ENV
from skillrl_cli.distill import load_teacher, make_distiller, teacher_options
from skillrl_cli.options import env_config_from, env_option, json_option
from skillrl_cli.skills import bank_options
from skillrl_cli.skills_view import console, print_json


def _agent(bank: Any, agent: str, teacher: dict[str, Any]) -> Any:
    if agent == "expert":
        return None  # bootstrap's default: the scripted expert
    from skillrl.agents.llm import LLMAgent

    policy = load_teacher(
        bank.config.workspace, teacher["teacher_backend"], teacher["teacher_model"],
        teacher["base_url"], "--agent teacher",
    )  # fmt: skip
    return LLMAgent(policy)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--env", default=DEFAULT_ENV, show_default=True, help="Environment to bootstrap.")
@click.option(
    "--episodes",
    type=click.IntRange(1),
    default=120,
    show_default=True,
    help="Training goals to play.",
)
@click.option(
    "--first-goal",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Index (within the train split) of the first goal played.",
)
@click.option(
    "--probe-fraction",
    type=click.FloatRange(0.0, 1.0, max_open=True),
    default=0.3,
    show_default=True,
    help="Fraction of goals played by an expert making one deliberate mistake "
    "(wrong or skipped option), so the bank starts with counterfactual notes.",
)
@click.option(
    "--agent",
    type=click.Choice(["expert", "teacher"]),
    default="expert",
    show_default=True,
    help="Who plays the honest episodes: the scripted expert or the teacher model.",
)
@click.option("--max-turns", type=click.IntRange(1), default=15, show_default=True,
              help="Turn limit per episode.")  # fmt: skip
@click.option(
    "--export",
    "export_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the bank's active skills and notes for ENV as a starting-bank JSON file.",
)
@click.option(
    "--export-cases",
    "cases_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the bank's active cases for ENV (what solved each training request) as a "
    "starting-cases JSON file, the format new workspaces are seeded from.",
)
@env_option
@teacher_options
@json_option
@bank_options(changes=True)
def bootstrap(bank: Any, env: str, episodes: int, first_goal: int, probe_fraction: float,
              agent: str, max_turns: int, export_path: Path | None, cases_path: Path | None,
              as_json: bool,
              env_options: dict[str, Any], **teacher: Any) -> None:  # fmt: skip
    """Play training goals with the expert (or a teacher model) and distill a starting bank."""
    import envs
    from skillrl.distill.bootstrap import BootstrapConfig, active_drafts, bootstrap_bank
    from skillrl.distill.seeding import write_starting_bank

    envs.registry.check_id(env)
    has_expert = envs.adapter_for(env).make_expert(max_turns) is not None
    if not has_expert and (agent == "expert" or probe_fraction > 0):
        raise click.UsageError(
            f"environment {env!r} has no scripted expert; use --agent teacher --probe-fraction 0"
        )
    env_config = env_config_from(env, env_options)  # before a teacher model loads
    config = BootstrapConfig(env=env, episodes=episodes, first_goal=first_goal,
                             probe_fraction=probe_fraction, max_turns=max_turns,
                             env_config=env_config)  # fmt: skip
    player = _agent(bank, agent, teacher)
    report = bootstrap_bank(bank, make_distiller(bank, **teacher), config, agent=player)
    regenerate = (
        f"skillrl bootstrap --env {env} --episodes {episodes} --first-goal {first_goal} "
        f"--probe-fraction {probe_fraction:g} --agent {agent} --distiller "
        f"{teacher['distiller']} --max-turns {max_turns}"
        + "".join(f" --env-option {key}={value}" for key, value in sorted(env_options.items()))
        + " --workspace <empty folder>"
    )
    if export_path is not None:
        command = f"{regenerate} --export {export_path}"
        write_starting_bank(export_path, env, active_drafts(bank, env), regenerate=command)
    if cases_path is not None:
        command = f"{regenerate} --export-cases {cases_path}"
        cases = active_drafts(bank, env, kinds=("case",))
        write_starting_bank(cases_path, env, cases, regenerate=command)
    if as_json:
        print_json(dataclasses.asdict(report))
        return
    out = console()
    out.print(
        f"played {report.episodes} training goal(s) of {env} in {report.rollout_seconds:.1f}s "
        f"({report.successes} succeeded; {report.probes} with a deliberate mistake)"
    )
    distilled = report.distill
    out.print(
        f"distilled them: [green]{len(distilled.added)} new entries[/], "
        f"{len(distilled.merged)} strengthened, {len(distilled.rejected)} rejected; "
        f"upkeep retired {len(report.retired)}; the bank now holds {bank.count()} active entries"
    )
    if export_path is not None:
        out.print(f"exported the starting bank to {export_path}")
    if cases_path is not None:
        out.print(f"exported the cases to {cases_path}")
