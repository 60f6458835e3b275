"""``skillrl sft``: cold-start fine-tuning (behaviour cloning + DAgger) on training goals.

A thin layer: it settles the options into a typed :class:`ColdStartJob` (a
:class:`~trainers.sft_config.ColdStartConfig` and the policy, prompt, teacher and folder it runs
with), opens the policy (and the bank, and a teacher), and runs
:class:`~trainers.cold_start.ColdStartRun` with rich progress bars. ``skillrl train --cold-start``
runs its job through :func:`run_cold_start` too.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from envs.registry import DEFAULT_ENV
from skillrl.policies.model_folders import check_model_path
from skillrl_cli.options import (
    SEED,
    env_config_from,
    env_option,
    json_option,
    max_new_tokens_option,
    max_prompt_tokens_option,
    max_turns_option,
    prompt_config_from,
    workspace_option,
)
from skillrl_cli.upfront_checks import check_prompt_budget, split_size
from skillrl_core.errors import ConfigError
from skillrl_core.splits import TRAIN_SPLIT
from trainers.sft_config import ColdStartConfig

if TYPE_CHECKING:
    from skillrl.policies import PolicyConfig
    from skillrl.prompts import PromptConfig


@click.command("sft")
@click.option("--env", "env_id", default=DEFAULT_ENV, show_default=True, help="Environment id.")
@click.option(
    "--source",
    "sources",
    type=click.Choice(["expert", "bank", "teacher"]),
    multiple=True,
    default=("expert",),
    show_default=True,
    help="Where demonstrations come from (repeat to combine): the scripted expert on training "
    "goals, successful training episodes stored in the bank, or a teacher model.",
)
@click.option(
    "--goals",
    type=click.IntRange(0),
    default=64,
    show_default=True,
    help="Training goals the expert (and teacher) play for behaviour cloning.",
)
@click.option(
    "--bank-episodes",
    type=click.IntRange(0),
    default=200,
    show_default=True,
    help="Most successful training episodes taken from the bank (--source bank).",
)
@click.option(
    "--split",
    default=TRAIN_SPLIT,
    show_default=True,
    help="Split of the goals; only 'train' is accepted (test and eval goals are never trained on).",
)
@click.option(
    "--dagger-rounds",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="DAgger rounds after behaviour cloning: roll out the policy, label every visited state "
    "with the expert's action, add the examples, train again.",
)
@click.option(
    "--dagger-goals",
    type=click.IntRange(1),
    default=32,
    show_default=True,
    help="Fresh training goals the policy plays in each DAgger round.",
)
@click.option(
    "--dagger-temperature",
    type=click.FloatRange(0),
    default=0.0,
    show_default=True,
    help="Sampling temperature of DAgger rollouts (0: greedy).",
)
@click.option(
    "--dagger-keep",
    type=click.Choice(["all", "mistakes"]),
    default="all",
    show_default=True,
    help="Labelled learner states a DAgger round keeps: all of them, or only those where the "
    "learner's action differs from the expert's (fewer examples per round, but mostly "
    "corrective actions: see docs/results.md for what two such rounds did to a cold start).",
)
@click.option(
    "--dagger-replay",
    type=click.FloatRange(0),
    default=None,
    help="Train each DAgger round on its new examples plus this many times as many drawn from "
    "earlier rounds (default: on the whole aggregated dataset, as in the paper).",
)
@click.option(
    "--skills/--no-skills",
    default=True,
    show_default=True,
    help="Put the skills retrieved at each turn into the examples (run the policy likewise).",
)
@click.option(
    "--skill-withhold",
    type=click.FloatRange(0, 1, max_open=True),
    default=0.0,
    show_default=True,
    help="With --skills: the fraction of examples whose prompt is built with no entries (drawn "
    "per turn from --seed), so the policy learns to play with and without retrieved skills.",
)
@click.option(
    "--constrained/--free",
    default=True,
    show_default=True,
    help="Targets in the constrained agent's format (query / click) or thought + action "
    "(free decoding); train for the mode you will run.",
)
@max_turns_option
@max_new_tokens_option
@max_prompt_tokens_option
@click.option(
    "--epochs",
    type=click.FloatRange(0, min_open=True),
    default=2.0,
    show_default=True,
    help="Passes over the dataset in every round.",
)
@click.option(
    "--learning-rate",
    "--lr",
    type=click.FloatRange(0, min_open=True),
    default=2e-4,
    show_default=True,
    help="AdamW learning rate (LoRA; use about 1e-5 with --full).",
)
@click.option(
    "--batch-size", type=click.IntRange(1), default=4, show_default=True, help="Examples per pass."
)
@click.option(
    "--grad-accum",
    type=click.IntRange(1),
    default=2,
    show_default=True,
    help="Passes per optimizer step.",
)
@click.option(
    "--lora/--full",
    "use_lora",
    default=True,
    show_default=True,
    help="Train a LoRA adapter (merged into the checkpoints) or every weight.",
)
@click.option("--lora-r", type=click.IntRange(1), default=16, show_default=True, help="LoRA rank.")
@click.option(
    "--lora-layers",
    type=click.IntRange(1),
    default=None,
    help="Adapt only the top N decoder layers (default: all): no backward pass below them.",
)
@click.option(
    "--packing/--no-packing",
    default=False,
    show_default=True,
    help="Pack examples into full rows (TRL); rarely pays for turn prompts of similar length.",
)
@click.option(
    "--save-steps",
    type=click.IntRange(1),
    default=25,
    show_default=True,
    help="Optimizer steps between resumable checkpoints inside a round.",
)
@click.option(
    "--model",
    default="embedded",
    show_default=True,
    help="Policy to fine-tune: 'embedded' (SmolLM2-135M-Instruct), a checkpoint folder or hub id.",
)
@click.option(
    "--teacher-backend",
    type=click.Choice(["transformers", "openai", "vllm", "trl-vllm"]),
    default="openai",
    show_default=True,
    help="Backend of the teacher model (--source teacher).",
)
@click.option("--teacher-model", default=None, help="Teacher model (--source teacher).")
@click.option("--teacher-base-url", default=None, help="Teacher server URL, if any.")
@click.option("--threads", type=click.IntRange(1), default=None, help="CPU threads for torch.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of goals and training.")
@click.option(
    "--run-name",
    default=None,
    help="Run folder under <workspace>/runs/ (files in its sft/ folder); default <env>-sft.",
)
@click.option(
    "--adapter-rank",
    type=click.IntRange(0),
    default=32,
    show_default=True,
    help="Also write the final model as one LoRA adapter of this rank over --model, with the "
    "settings it was trained under (runs/<name>/sft/adapter/; 0: none). Exact when the rank is at "
    "least --lora-r times the rounds; the command says how much of the change a smaller one keeps.",
)
@click.option("--resume", is_flag=True, help="Continue the run from its last completed step.")
@env_option
@workspace_option
@json_option
def sft(**options: Any) -> None:
    """Fine-tune the policy on expert (bank, teacher) turns, then DAgger rounds.

    Every example is a turn's prompt exactly as the agent builds it at run time (task, the
    skills retrieved at that turn, recent actions, observation, admissible actions, same prompt
    budget) and the action in the policy's own output format; the loss covers the action only.
    Only training goals are used. The dataset is written as JSONL (runs/<name>/sft/dataset.jsonl)
    and each round's model as a safetensors checkpoint. Kill it at any time; --resume continues.
    """
    from skillrl_cli.train_session import run_folder

    o = options
    name = f"{o['env_id']}-sft" if o["run_name"] is None else o["run_name"]  # "" is refused
    job = cold_start_job(o, cold_start_config(o), run_folder(o["workspace"], name) / "sft")
    final = run_cold_start(job)
    if o["adapter_rank"]:
        _export_adapter(job, final, o["adapter_rank"])
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


def cold_start_job(o: dict[str, Any], config: ColdStartConfig, folder: Path) -> ColdStartJob:
    """Settle a cold start's options (``sft``'s, or ``train --cold-start``'s) into a job.

    Needs ``model``, ``workspace``, ``threads``, ``max_prompt_tokens``, ``resume``, ``as_json``
    and, optionally, ``env_options`` and the teacher's ``teacher_backend`` / ``teacher_model``
    / ``teacher_base_url`` (``train`` has no teacher options).
    """
    from skillrl_cli.train_session import training_policy_config

    teacher = None
    if "teacher" in config.sources:
        from skillrl_cli.distill import teacher_config

        teacher = teacher_config(
            o["workspace"], o["teacher_backend"], o.get("teacher_model"),
            o.get("teacher_base_url"), "--source teacher",
        )  # fmt: skip
    return ColdStartJob(
        config=config,
        policy=training_policy_config(o["model"], o["workspace"], o["threads"]),
        prompt=prompt_config_from(o),
        env_options=dict(o.get("env_options") or {}),
        teacher=teacher,
        folder=folder,
        resume=o["resume"],
        as_json=o["as_json"],
    )


def _export_adapter(job: ColdStartJob, checkpoint: Path, rank: int) -> None:
    from rich.console import Console

    from trainers.adapter_export import export_checkpoint
    from trainers.cold_start import settings_of

    console = Console(stderr=job.as_json)
    recipe = " ".join(["skillrl", *sys.argv[1:]])
    budget = job.prompt.max_prompt_tokens
    settings = settings_of(job.config, budget, job.env_options, recipe=recipe)
    with console.status("writing the final model as a LoRA adapter"):
        done = export_checkpoint(
            job.model, checkpoint, job.folder / "adapter", rank=rank, settings=settings
        )
    console.print(
        f"[green]adapter[/]: {done.folder} (rank {done.rank}, {done.layers} decoder layers, "
        f"{done.modules} linear modules, "
        f"{done.bytes / 2**20:.1f} MiB, keeps {100 * done.kept_energy:.2f}% of the weight change); "
        f"play it with `skillrl run --model {done.folder}`"
    )


def cold_start_config(o: dict[str, Any]) -> ColdStartConfig:
    """Build the :class:`ColdStartConfig` the ``sft`` options ask for."""
    return ColdStartConfig(
        env_id=o["env_id"],
        sources=tuple(dict.fromkeys(o["sources"])),
        split=o["split"],
        goals=o["goals"],
        bank_episodes=o["bank_episodes"],
        dagger_rounds=o["dagger_rounds"],
        dagger_goals=o["dagger_goals"],
        dagger_temperature=o["dagger_temperature"],
        dagger_keep=o.get("dagger_keep", "all"),
        dagger_replay=o.get("dagger_replay"),
        skills=o["skills"],
        skill_withhold=o.get("skill_withhold", 0.0),
        constrained=o["constrained"],
        max_turns=o["max_turns"],
        max_new_tokens=o["max_new_tokens"],
        num_train_epochs=o["epochs"],
        learning_rate=o["learning_rate"],
        per_device_train_batch_size=o["batch_size"],
        gradient_accumulation_steps=o["grad_accum"],
        packing=o["packing"],
        use_peft=o["use_lora"],
        lora_r=o["lora_r"],
        lora_alpha=2 * o["lora_r"],
        lora_layers=o.get("lora_layers"),
        save_steps=o["save_steps"],
        seed=o["seed"],
    )


def run_cold_start(job: ColdStartJob) -> Path:
    """Run (or resume, or skip when finished) a cold start with progress bars.

    Returns the cold-started model's checkpoint folder.
    """
    config, folder = job.config, job.folder
    # Every setting is checked before torch imports or a model loads: a typo fails in seconds.
    env_config = env_config_from(config.env_id, job.env_options)
    check_prompt_budget(config.env_id, job.prompt.max_prompt_tokens)
    split_size(config.env_id, env_config, config.split, "--split")
    check_model_path(job.model)
    from rich.console import Console

    from skillrl.policies import load_policy
    from skillrl_cli.bank_access import open_bank
    from trainers.cold_start import ColdStartRun, finished_checkpoint

    console = Console(stderr=job.as_json)
    if not job.resume and (folder / "state.json").exists():
        raise ConfigError(
            f"{folder} already holds a cold-start run; pass --resume or another --run-name"
        )
    done = finished_checkpoint(folder, config.rounds)
    if done is not None:  # nothing to load or redo
        console.print(f"cold start already done: {done}")
        return done
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


def done_figures(history: list[dict[str, Any]]) -> str:
    """Say how many rounds trained, on how many examples the last did and its mean loss."""
    if not history:
        return "no round trained"
    last = history[-1]
    rounds = f"{len(history)} round{'s' if len(history) != 1 else ''}"
    said = f"{rounds}; the last trained on {last.get('train.examples', '?')} examples"
    loss = last.get("train.loss")
    if not isinstance(loss, int | float) or loss != loss:  # NaN: resumed after its last step
        return f"{said} (its loss is not recorded: resumed after its last step)"
    return f"{said} at a mean loss of {loss:.4f}"


def _needs_bank(config: Any) -> bool:
    return config.skills or "bank" in config.sources


def _run_with_bars(run: Any, console: Any, resume: bool) -> None:
    from skillrl_cli.train_session import PhaseBars
    from trainers.cold_start import ColdStartPhase
    from trainers.phased_run import PhaseEnded, PhaseStarted

    rounds = run.config.rounds
    with PhaseBars(console, "cold start (phases)", 2 * rounds) as bars:
        run.on_episode = bars.show("  episodes")
        run.on_step = bars.show("  optimizer steps")

        def started(event: PhaseStarted) -> None:
            what = "gathering examples" if event.phase is ColdStartPhase.DATA else "fine-tuning"
            kind = "behaviour cloning" if event.index == 0 else f"DAgger round {event.index}"
            bars.phase(f"{kind}: {what}")

        run.events.on(PhaseStarted, started).on(PhaseEnded, lambda event: bars.advance())
        if resume and run.exists():
            state = run.load_state()
            done = sum(state.completed(r, p) for r in range(rounds) for p in ColdStartPhase)
            bars.phases_done(done)
        run.run(resume=resume)
