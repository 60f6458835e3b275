"""``skillrl sft``: cold-start fine-tuning (behaviour cloning + DAgger) on training goals.

A thin layer: it settles the options into a typed :class:`ColdStartJob` (a
:class:`~trainers.cold_start.sft_config.ColdStartConfig` and the policy, prompt, teacher and folder
it runs with), opens the policy (and the bank, and a teacher), and runs
:class:`~trainers.cold_start.cold_start.ColdStartRun` with rich progress bars.
``skillrl train --cold-start`` runs its job through :func:`run_cold_start` too.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from skillrl.prompts import PromptConfig
from skillrl_cli.config_options import OptionGroup, build, config_options
from skillrl_cli.options import (
    BASE_MODEL,
    MODEL_HELP,
    env_config_from,
    env_option,
    json_option,
    resolve_training_model,
    workspace_option,
)
from skillrl_cli.upfront_checks import check_prompt_budget, split_size
from skillrl_core.errors import ConfigError
from skillrl_core.option_fields import option
from trainers.cold_start.sft_config import ColdStartConfig

if TYPE_CHECKING:
    from skillrl.policies import PolicyConfig


@dataclass(frozen=True)
class SFTLaunch:
    """How ``skillrl sft`` starts: from which model, with which teacher, into which folder."""

    model: str = option(BASE_MODEL, help=f"The model to fine-tune. {MODEL_HELP}")
    teacher_backend: str = option(
        "openai",
        help="Backend of the teacher model (--source teacher).",
        choices=("transformers", "openai", "vllm", "trl-vllm"),
    )
    teacher_model: str | None = option(None, help="Teacher model (--source teacher).")
    teacher_base_url: str | None = option(None, help="Teacher server URL, if any.")
    threads: int | None = option(None, help="CPU threads for torch.", low=1)
    run_name: str | None = option(
        None,
        help="Run folder under <workspace>/runs/ (files in its sft/ folder); default <env>-sft.",
    )
    adapter_rank: int = option(
        32,
        help="Also write the final model as one LoRA adapter of this rank over --model, with the "
        "settings it was trained under (runs/<name>/sft/adapter/; 0: none). Exact when the rank "
        "is at least --lora-r times the rounds; the command says how much of the change a "
        "smaller one keeps.",
        low=0,
    )
    resume: bool = option(
        False, help="Continue the run from its last completed step.", show_default=False
    )


COLD_START_OPTIONS = OptionGroup(ColdStartConfig)
PROMPT_OPTIONS = OptionGroup(PromptConfig)
LAUNCH_OPTIONS = OptionGroup(SFTLaunch)


@click.command("sft")
@config_options(COLD_START_OPTIONS, PROMPT_OPTIONS, LAUNCH_OPTIONS)
@env_option
@workspace_option
@json_option
def sft(**values: Any) -> None:
    """Fine-tune the policy on expert (bank, teacher) turns, then DAgger rounds.

    Every example is a turn's prompt exactly as the agent builds it at run time (task, the
    skills retrieved at that turn, recent actions, observation, admissible actions, same prompt
    budget) and the action in the policy's own output format; the loss covers the action only.
    Only training goals are used. The dataset is written as JSONL (runs/<name>/sft/dataset.jsonl)
    and each round's model as a safetensors checkpoint. Kill it at any time; --resume continues.
    """
    from skillrl_cli.library import training_policy_config
    from skillrl_cli.train_session import run_folder

    launch = build(LAUNCH_OPTIONS, values)
    config = build(
        COLD_START_OPTIONS,
        values,
        sources=tuple(dict.fromkeys(values["sources"])),
        lora_alpha=2 * values["lora_r"],
    )
    name = f"{config.env_id}-sft" if launch.run_name is None else launch.run_name  # "" refused
    workspace = values["workspace"]
    teacher = None
    if "teacher" in config.sources:
        from skillrl_cli.distill import teacher_config

        teacher = teacher_config(
            workspace, launch.teacher_backend, launch.teacher_model, launch.teacher_base_url,
            "--source teacher",
        )  # fmt: skip
    job = ColdStartJob(
        config=config,
        policy=training_policy_config(launch.model, workspace, launch.threads),
        prompt=build(PROMPT_OPTIONS, values),
        env_options=dict(values["env_options"]),
        teacher=teacher,
        folder=run_folder(workspace, name) / "sft",
        resume=launch.resume,
        as_json=values["as_json"],
    )
    try:
        final = run_cold_start(job)
    except KeyboardInterrupt:
        from rich.console import Console

        from skillrl_cli.train_session import interrupted_line

        started = (job.folder / "state.json").exists()
        Console(stderr=True).print(interrupted_line(sys.argv[1:], started), soft_wrap=True)
        raise click.exceptions.Exit(130) from None  # 128 + SIGINT, as a shell reports it
    if launch.adapter_rank:
        _export_adapter(job, final, launch.adapter_rank)
    if job.as_json:
        state = json.loads((job.folder / "state.json").read_text(encoding="utf-8"))
        click.echo(json.dumps(state["history"], indent=2, sort_keys=True))


@dataclass(frozen=True)
class ColdStartJob:
    """A cold start to run: its config and everything it runs with, settled from options."""

    config: ColdStartConfig
    """What to train on and how (sources, goals, DAgger rounds, epochs, LoRA)."""
    policy: PolicyConfig
    """The in-process policy it fine-tunes, loaded from ``--model``."""
    prompt: PromptConfig
    """How each example's prompt is built, as the agent builds it at run time."""
    env_options: dict[str, Any]
    """Environment settings given with ``--env-option`` (the pages it trains on)."""
    teacher: PolicyConfig | None
    """The teacher model for ``--source teacher``; None without that source."""
    folder: Path
    """Where the run keeps its dataset, rounds and state (``<run folder>/sft``)."""
    resume: bool
    """Continue the run in ``folder``."""
    as_json: bool
    """Print the history as JSON on stdout (the screen goes to stderr)."""

    @property
    def model(self) -> str:
        """The model it starts from (``--model``)."""
        return self.policy.model


def check_goals_fit(config: ColdStartConfig, size: int) -> None:
    """Refuse a round of more goals than the training split holds (``size``).

    Rounds walk one shuffled order of the split and wrap, so goals beyond its size would be
    played again, not added: hours spent on repeats.
    """
    plays = any(source in ("expert", "teacher") for source in config.sources)
    counts = {
        "goals": config.goals if plays else 0,
        "dagger_goals": config.dagger_goals if config.dagger_rounds else 0,
    }
    for name, count in counts.items():
        if count > size:
            raise ConfigError(
                f"{name} ({count}) is more than the {size} goals of the {config.split!r} split of "
                f"{config.env_id!r}: give at most {size}"
            )


def _export_adapter(job: ColdStartJob, checkpoint: Path, rank: int) -> None:
    from rich.console import Console

    from skillrl_cli.train_session import PhaseBars
    from trainers.cold_start.adapter_export import export_checkpoint
    from trainers.cold_start.cold_start import settings_of

    console = Console(stderr=job.as_json)
    recipe = " ".join(["skillrl", *sys.argv[1:]])
    budget = job.prompt.max_prompt_tokens
    settings = settings_of(job.config, budget, job.env_options, recipe=recipe)
    # A counter, not a spinner: the export factorises every changed module (minutes on a CPU).
    with PhaseBars(console, "writing the final model as a LoRA adapter", 1) as bars:
        bars.phase(f"exporting a rank-{rank} adapter: one SVD per changed module")
        done = export_checkpoint(
            job.model,
            checkpoint,
            job.folder / "adapter",
            rank=rank,
            settings=settings,
            on_module=bars.show("  modules:"),
        )
        bars.advance()
    console.print(
        f"[green]adapter[/]: {done.folder} (rank {done.rank}, {done.layers} decoder layers, "
        f"{done.modules} linear modules, "
        f"{done.bytes / 2**20:.1f} MiB, keeps {100 * done.kept_energy:.2f}% of the weight change); "
        f"play it with `skillrl run --model {done.folder}`"
    )


def run_cold_start(job: ColdStartJob) -> Path:
    """Run (or resume, or skip when finished) a cold start with progress bars.

    Returns the cold-started model's checkpoint folder.
    """
    config, folder = job.config, job.folder
    # Every setting is checked before torch imports or a model loads: a typo fails in seconds.
    env_config = env_config_from(config.env_id, job.env_options)
    check_prompt_budget(config.env_id, job.prompt.max_prompt_tokens)
    check_goals_fit(config, split_size(config.env_id, env_config, config.split, "--split"))
    # The --model word (auto, shipped, base, a path) once the cheap checks passed.
    model = resolve_training_model(job.model, "transformers", job.policy.workspace, config.env_id)
    job = dataclasses.replace(job, policy=dataclasses.replace(job.policy, model=model))
    from rich.console import Console

    from skillrl.policies import load_policy
    from skillrl_cli.bank_access import open_bank
    from trainers.cold_start.cold_start import ColdStartRun, finished_checkpoint

    console = Console(stderr=job.as_json)
    if not job.resume and (folder / "state.json").exists():
        raise ConfigError(
            f"{folder} already holds a cold-start run; pass --resume or another --run-name"
        )
    done = finished_checkpoint(folder, config.rounds)
    if done is not None:  # nothing to load or redo
        console.print(f"cold start already done: {done}")
        return done
    for line in opening_lines(job, env_config):
        console.print(line, soft_wrap=True)  # a wrapped path cannot be copied
    # The teacher first: a wrong teacher is refused before the policy loads.
    teacher = load_policy(job.teacher) if job.teacher is not None else None
    policy = load_policy(job.policy)
    bank = open_bank(job.policy.workspace, config.env_id) if _needs_bank(config) else None
    try:
        run = ColdStartRun(
            config,
            policy=policy,
            run_dir=folder,
            env_config=env_config,
            prompt_config=job.prompt,
            bank=bank,
            teacher=teacher,
        )
        _run_with_bars(run, console, job.resume)
        console.print(
            f"[green]cold start done[/]: {done_figures(run.load_state().history)}; model "
            f"{run.final_checkpoint}, dataset {run.dataset_path}",
            soft_wrap=True,
        )
        return run.final_checkpoint
    finally:
        if bank is not None:
            bank.close()


def opening_lines(job: ColdStartJob, env_config: dict[str, Any]) -> list[str]:
    """Say what a cold start will do, before the model loads (rich markup).

    The model, the environment, the rounds and the run folder; on ``--resume``, the round it
    goes on from (read from the run's ``state.json``).
    """
    from rich.markup import escape

    from skillrl_cli.options import model_line
    from skillrl_core.errors import DataFileError
    from skillrl_core.files import read_json_object

    config = job.config
    options = "".join(f", {k}={v}" for k, v in sorted(env_config.items()) if k != "max_turns")
    skills = "skills retrieved every turn" if config.skills else "no skills"
    dagger = f" + {config.dagger_rounds} DAgger round(s)" if config.dagger_rounds else ""
    lines = [
        model_line(job.model),
        f"environment: {config.env_id}{escape(options)}, {skills}",
        f"cold start: behaviour cloning on {config.goals} training goals "
        f"({', '.join(config.sources)}){dagger}, LoRA r={config.lora_r}",
        f"run: {escape(job.folder.parent.name)} in {escape(str(job.folder))}",
    ]
    state_path = job.folder / "state.json"
    if job.resume and state_path.exists():
        try:
            state = read_json_object(state_path)
        except DataFileError:
            return lines  # the run itself refuses a damaged state, naming it
        phase = state.get("phase")
        after = f" after its {phase} phase" if isinstance(phase, str) and phase else ""
        lines.append(
            f"[yellow]resuming at round {state.get('round', 0)}{after} (of {config.rounds})[/]"
        )
    return lines


def done_figures(history: list[dict[str, Any]]) -> str:
    """Say how many rounds trained, on how many examples the last did and its mean loss."""
    from trainers.cold_start.round_metrics import RoundMetrics

    if not history:
        return "no round trained"
    last = RoundMetrics.from_row(history[-1]).train
    rounds = f"{len(history)} round{'s' if len(history) != 1 else ''}"
    said = f"{rounds}; the last trained on {last.examples if last else '?'} examples"
    loss = last.loss if last else None
    if not isinstance(loss, int | float) or loss != loss:  # NaN: resumed after its last step
        return f"{said} (its loss is not recorded: resumed after its last step)"
    return f"{said} at a mean loss of {loss:.4f}"


def _needs_bank(config: Any) -> bool:
    return config.skills or "bank" in config.sources


def _run_with_bars(run: Any, console: Any, resume: bool) -> None:
    from skillrl_cli.train_session import PhaseBars
    from trainers.cold_start.cold_start import ColdStartPhase
    from trainers.common.phased_run import PhaseStarted

    rounds = run.config.rounds
    with PhaseBars(console, "cold start (phases)", 2 * rounds) as bars:
        run.on_episode = bars.show("  episodes")
        loss, counts = "", (0, 0)

        def stepped(done: int, total: int) -> None:
            nonlocal counts
            counts = (done, total)
            bars.show(f"  optimizer steps{loss}")(done, total)

        def logged(step: int, value: float) -> None:
            # The trainer logs a step's loss after the step's counter moved: shown again with it.
            nonlocal loss
            loss = f", loss {value:.4f}"
            if counts[1]:
                bars.show(f"  optimizer steps{loss}")(*counts)

        run.on_step, run.on_loss = stepped, logged

        def described(event: PhaseStarted) -> str:
            what = "gathering examples" if event.phase is ColdStartPhase.DATA else "fine-tuning"
            kind = "behaviour cloning" if event.index == 0 else f"DAgger round {event.index}"
            return f"{kind}: {what}"

        bars.follow(run.events, described)
        if resume and run.exists():
            state = run.load_state()
            done = sum(state.completed(r, p) for r in range(rounds) for p in ColdStartPhase)
            bars.phases_done(done)
        run.run(resume=resume)
