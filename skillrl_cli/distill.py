"""``skillrl distill``: turn stored, undistilled episodes into skills and counterfactual notes.

Idempotent: episodes are marked distilled, so running it twice adds nothing the second time.
By default only training episodes are distilled (evaluation episodes must not leak into the bank)
and bank upkeep (low-utility retirement, per-category caps) runs afterwards.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from skillrl_cli.options import json_option
from skillrl_cli.skills import bank_options
from skillrl_cli.skills_view import console, print_json


def teacher_options(command: Any) -> Any:
    """Options that choose the distiller and, for ``teacher``, the policy that writes entries."""
    options = [
        click.option(
            "--distiller",
            type=click.Choice(["analytic", "teacher"]),
            default="analytic",
            show_default=True,
            help="analytic: from trajectory structure and reward breakdown (offline, no model); "
            "teacher: a chat model writes the entries as JSON (validated, retried).",
        ),
        click.option(
            "--teacher-backend",
            type=click.Choice(["transformers", "openai", "vllm"]),
            default="openai",
            show_default=True,
            help="Policy backend of the teacher model.",
        ),
        click.option(
            "--teacher-model",
            default=None,
            help="Teacher model: 'embedded', a local path, or a served model name.",
        ),
        click.option(
            "--base-url", default=None, help="Server URL of an OpenAI-compatible teacher."
        ),
        click.option(
            "--teacher-retries",
            type=click.IntRange(0, 10),
            default=2,
            show_default=True,
            help="Extra attempts per episode after a malformed or leaky teacher reply.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def teacher_config(workspace: Any, teacher_backend: str, teacher_model: str | None,
                   base_url: str | None, flag: str) -> Any:  # fmt: skip
    """Return the teacher policy's config (``flag`` names the option that asked for it).

    Refuses a missing ``--teacher-model`` before anything loads.
    """
    if not teacher_model:
        raise click.UsageError(f"{flag} needs --teacher-model")
    from skillrl.policies import PolicyConfig
    from skillrl.workspace import resolve_workspace

    return PolicyConfig(
        backend=teacher_backend,
        model=teacher_model,
        base_url=base_url,
        workspace=resolve_workspace(workspace),
    )


def load_teacher(workspace: Any, teacher_backend: str, teacher_model: str | None,
                 base_url: str | None, flag: str) -> Any:  # fmt: skip
    """Load the teacher policy (``flag`` names the option that asked for it, for the error)."""
    from skillrl.policies import load_policy

    return load_policy(teacher_config(workspace, teacher_backend, teacher_model, base_url, flag))


def make_distiller(
    bank: Any,
    distiller: str,
    teacher_backend: str,
    teacher_model: str | None,
    base_url: str | None,
    teacher_retries: int,
) -> Any:
    """Build the chosen distiller (loading the teacher policy only when it is asked for)."""
    from skillrl.distill import AnalyticDistiller, TeacherConfig, TeacherDistiller

    if distiller == "analytic":
        return AnalyticDistiller()
    policy = load_teacher(
        bank.config.workspace, teacher_backend, teacher_model, base_url, "--distiller teacher"
    )
    return TeacherDistiller(policy, TeacherConfig(max_retries=teacher_retries))


def print_report(report: Any, retired: dict[str, str] | None) -> None:
    """Print a short summary of a distillation pass (and of the upkeep after it)."""
    out = console()
    out.print(
        f"[bold]{report.distiller}[/] distilled {report.episodes_distilled} of "
        f"{report.episodes_seen} pending episode(s) in {report.seconds:.1f}s: "
        f"{report.drafts} draft(s), [green]{len(report.added)} new[/], "
        f"{len(report.merged)} merged into existing entries, "
        f"{len(report.rejected)} rejected."
    )
    for rejection in report.rejected:
        out.print(f"  rejected [italic]{rejection.title}[/]: {'; '.join(rejection.reasons)}")
    if retired:
        out.print(f"upkeep retired {len(retired)} entr{'y' if len(retired) == 1 else 'ies'}:")
        for entry_id, reason in retired.items():
            out.print(f"  {entry_id[:12]}  {reason}")
    if not report.episodes_seen:
        out.print("Nothing to distill: every stored training episode is distilled already.")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--env", default=None, help="Only episodes of this environment (default: all).")
@click.option(
    "--split",
    "splits",
    multiple=True,
    default=("train",),
    show_default=True,
    help="Episode split(s) to distill (repeatable); 'all' takes every split.",
)
@click.option("--limit", type=click.IntRange(1), default=None, help="At most this many episodes.")
@click.option(
    "--batch-size",
    type=click.IntRange(1),
    default=64,
    show_default=True,
    help="Episodes per distiller call (each batch is written and marked before the next).",
)
@click.option(
    "--upkeep/--no-upkeep",
    default=True,
    show_default=True,
    help="Afterwards, retire low-utility entries and enforce the per-category caps.",
)
@teacher_options
@json_option
@bank_options(changes=True)
def distill(bank: Any, env: str | None, splits: tuple[str, ...], limit: int | None,
            batch_size: int, upkeep: bool, as_json: bool, **teacher: Any) -> None:  # fmt: skip
    """Distill stored trajectories that have not been distilled yet into the skill bank."""
    from skillrl.distill import PipelineConfig, distill_pending
    from skillrl.distill import upkeep as run_upkeep

    config = PipelineConfig(
        env=env,
        splits=None if "all" in splits else tuple(splits),
        batch_size=batch_size,
        limit=limit,
    )
    report = distill_pending(bank, make_distiller(bank, **teacher), config)
    retired = run_upkeep(bank).retired if upkeep else None
    if as_json:
        print_json({**dataclasses.asdict(report), "retired": retired or {}})
    else:
        print_report(report, retired)
