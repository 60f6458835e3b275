"""``skillrl train``: recursive improvement cycles (roll out, distill, GRPO, evaluate, evolve).

A thin layer: it settles the options into one :class:`~skillrl_cli.train_setup.TrainSettings`
(the cycle's and the update's configs, the policy, the prompt, the folder), claims the run
folder, and runs :class:`~trainers.cycle.TrainingRun` over the policy and the bank with rich
progress (:func:`~skillrl_cli.train_session.run_with_progress`).
"""

from __future__ import annotations

import json
from typing import Any

import click

from envs.registry import DEFAULT_ENV
from skillrl_cli.options import (
    SEED,
    decoding_option,
    env_option,
    json_option,
    max_new_tokens_option,
    max_prompt_tokens_option,
    max_turns_option,
    workspace_option,
)
from skillrl_cli.train_config import config_option, option_sources
from skillrl_cli.train_session import run_with_progress
from skillrl_cli.train_setup import AUTO_ROLLOUT_DTYPE, check_run_folder, settle_training
from skillrl_core.splits import TEST_SPLIT
from trainers.advantages import ESTIMATORS
from trainers.config import ROLLOUT_DTYPES
from trainers.trackers import REPORT_TO


@click.command("train")
@click.option("--env", "env_id", default=DEFAULT_ENV, show_default=True, help="Environment id.")
@click.option(
    "--cycles",
    type=click.IntRange(1),
    default=3,
    show_default=True,
    help="Improvement cycles after the cycle-0 evaluation.",
)
@click.option(
    "--goals-per-cycle",
    type=click.IntRange(1),
    default=4,
    show_default=True,
    help="Training goals (groups with signal) per cycle.",
)
@click.option(
    "--group-size",
    type=click.IntRange(2),
    default=4,
    show_default=True,
    help="Episodes per training goal (GRPO group size G).",
)
@click.option(
    "--eval-goals",
    type=click.IntRange(0),
    default=10,
    show_default=True,
    help="Fixed evaluation goals (the first N of --eval-split), same every cycle.",
)
@click.option(
    "--eval-split", default=TEST_SPLIT, show_default=True, help="Split of the eval goals."
)
@click.option(
    "--eval-every",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Evaluate every N-th cycle; cycle 0 and the last cycle are always evaluated (a "
    "100-goal evaluation costs about a training cycle on a CPU).",
)
@click.option(
    "--validation-goals",
    type=click.IntRange(0),
    default=4,
    show_default=True,
    help="Goals of the 'eval' split whose failures evolve the bank (0: the evaluation goals' "
    "failures, unless those are test goals: the bank never learns from the test split).",
)
@max_turns_option
@max_new_tokens_option
@max_prompt_tokens_option
@click.option(
    "--learning-rate",
    "--lr",
    type=float,
    default=1e-5,
    show_default=True,
    help="AdamW learning rate.",
)
@click.option(
    "--step-weight",
    "-w",
    type=click.FloatRange(0),
    default=1.0,
    show_default=True,
    help="w in A = A_episode + w * A_step (GiGPO); 0 gives plain GRPO.",
)
@click.option(
    "--estimator",
    type=click.Choice(ESTIMATORS),
    default="grpo",
    show_default=True,
    help="How turns get their advantage: grpo (group-relative: episode level plus --step-weight "
    "times step level) or rft (rejection-sampling fine-tuning on the policy's own samples: "
    "every turn of an episode that succeeded is trained on, with the tokens it produced, and "
    "failures are not; pair it with --no-dynamic-sampling, which would drop groups that all "
    "succeeded).",
)
@click.option(
    "--rft-weight",
    type=click.FloatRange(0),
    default=0.0,
    show_default=True,
    help="With --estimator grpo: added to the advantage of every turn of a successful episode "
    "(RFT mixed into GRPO); 0 is plain GRPO.",
)
@click.option(
    "--gamma",
    type=click.FloatRange(0, 1),
    default=0.95,
    show_default=True,
    help="Discount of the step-level returns.",
)
@click.option(
    "--beta",
    type=click.FloatRange(0),
    default=0.0,
    show_default=True,
    help="KL coefficient to the reference model (0: no reference model).",
)
@click.option("--epsilon", type=float, default=0.2, show_default=True, help="Lower clip.")
@click.option(
    "--epsilon-high", type=float, default=0.28, show_default=True, help="Upper clip (clip-higher)."
)
@click.option(
    "--loss-type",
    type=click.Choice(["dapo", "bnpo", "grpo", "dr_grpo"]),
    default="dapo",
    show_default=True,
    help="Token aggregation of the loss.",
)
@click.option(
    "--num-iterations",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Passes over each cycle's turns.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1),
    default=4,
    show_default=True,
    help="Turns per forward pass.",
)
@click.option(
    "--grad-accum",
    type=click.IntRange(1),
    default=4,
    show_default=True,
    help="Micro-batches per optimizer step.",
)
@click.option(
    "--whole-groups/--shuffled-turns",
    "whole_groups",
    default=True,
    show_default=True,
    help="Fill each optimizer step with whole groups (a goal's episodes together, as verl "
    "does), so the step encodes their shared prompt once; --shuffled-turns mixes turns of all "
    "groups in every step (as TRL does).",
)
@click.option(
    "--skills/--no-skills",
    default=True,
    show_default=True,
    help="Retrieve skills every turn and grow the bank (distill, evolve).",
)
@click.option(
    "--lora/--full",
    "use_lora",
    default=False,
    show_default=True,
    help="Train a LoRA adapter (peft) instead of every weight.",
)
@click.option("--lora-r", type=click.IntRange(1), default=16, show_default=True, help="LoRA rank.")
@click.option(
    "--torch-compile/--no-torch-compile",
    default=False,
    show_default=True,
    help="Compile the update's forward and backward with torch.compile (inductor), as plain "
    "rows instead of the default prefix trees (whose passes change shape too often to "
    "compile). On 2 CPU cores the trees were faster (LoRA: 434 vs 328 tokens/s after 237 s of "
    "compiling; docs/results.md, Speed).",
)
@click.option(
    "--rollout-dtype",
    type=click.Choice((*ROLLOUT_DTYPES, AUTO_ROLLOUT_DTYPE)),
    default="float32",
    show_default=True,
    help="Number format of the training rollouts. float32 plays the trained weights; bfloat16 "
    "plays a copy refreshed after every update, faster on CPUs with native bf16 (AVX512-BF16, "
    "AMX) and on GPUs, and the update's clipped ratio corrects for the rounding; auto picks "
    "bfloat16 where the machine computes it natively, else float32, and the run saves what it "
    "picked. Evaluation always plays float32. In-process backend only.",
)
@click.option(
    "--bf16/--no-bf16",
    default=False,
    show_default=True,
    help="Run the update's forward passes in bf16 autocast (mixed precision): weights, "
    "gradients and optimizer state stay float32. Its matrix products run faster on GPUs and on "
    "CPUs with native bf16 (AVX512-BF16, AMX), but on a 2-core AMX CPU the recipe's update "
    "took as long as in float32 (docs/results.md, Training speed); slower where bf16 is "
    "emulated.",
)
@decoding_option
@click.option(
    "--dynamic-sampling/--no-dynamic-sampling",
    default=True,
    show_default=True,
    help="Drop groups with no reward signal and top up from further goals.",
)
@click.option(
    "--max-topup-rounds",
    type=click.IntRange(0),
    default=3,
    show_default=True,
    help="Extra rollout rounds per cycle to replace dropped groups.",
)
@click.option(
    "--invalid-penalty",
    type=click.FloatRange(0),
    default=0.1,
    show_default=True,
    help="Reward subtracted for each invalid action.",
)
@click.option(
    "--turn-cost",
    type=click.FloatRange(0),
    default=0.01,
    show_default=True,
    help="Reward subtracted for each turn.",
)
@click.option(
    "--temperature",
    type=click.FloatRange(0, min_open=True),
    default=1.0,
    show_default=True,
    help="Sampling temperature of training rollouts.",
)
@click.option(
    "--backend",
    type=click.Choice(["transformers", "trl-vllm", "openai", "vllm"]),
    default="transformers",
    show_default=True,
    help="Rollout backend. transformers: the trained model itself generates. trl-vllm: "
    "a `trl vllm-serve` server generates (GPU) and gets the new weights after every update; "
    "the trained model still runs in-process. openai and vllm cannot train.",
)
@click.option(
    "--base-url",
    default=None,
    help="Root of the `trl vllm-serve` server for --backend trl-vllm, e.g. "
    "http://127.0.0.1:8000 (required with it, not used otherwise).",
)
@click.option(
    "--model",
    default="embedded",
    show_default=True,
    help="'embedded' (SmolLM2-135M-Instruct, untrained), 'shipped' (the cold-started adapter "
    "the package ships for --env), a checkpoint or adapter folder, or a hub id. A model that "
    "records the settings it was trained under (skillrl.json: skills, prompt budget, decoding, "
    "environment options) trains under them unless you give those options.",
)
@click.option("--threads", type=click.IntRange(1), default=None, help="CPU threads for torch.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of goals and sampling.")
@click.option(
    "--run-name",
    default=None,
    help="Run folder name under <workspace>/runs/ (default: the environment id).",
)
@click.option(
    "--report-to",
    type=click.Choice(REPORT_TO),
    default=REPORT_TO[0],
    show_default=True,
    help="Experiment tracker that gets each cycle's metrics besides runs/<name>/metrics.jsonl, "
    "as TrainingArguments.report_to: tensorboard (event files in runs/<name>/tensorboard), "
    "wandb or trackio (extras: pip install 'skillrl[wandb]' or 'skillrl[trackio]'; WANDB_PROJECT "
    "/ TRACKIO_PROJECT name the project, default skillrl). May change on --resume.",
)
@click.option(
    "--cold-start",
    is_flag=True,
    help="First fine-tune the policy on expert turns of training goals (behaviour cloning, then "
    "--dagger-rounds), as its own resumable phase in <run>/sft/; cycle 0 then evaluates the "
    "cold-started policy and GRPO starts from it (see `skillrl sft --help`).",
)
@click.option(
    "--cold-start-goals",
    type=click.IntRange(1),
    default=64,
    show_default=True,
    help="Training goals the expert plays for the cold start's behaviour cloning.",
)
@click.option(
    "--dagger-rounds",
    type=click.IntRange(0),
    default=1,
    show_default=True,
    help="DAgger rounds of the cold start (policy rolls out, expert labels, train again).",
)
@click.option(
    "--dagger-goals",
    type=click.IntRange(1),
    default=32,
    show_default=True,
    help="Training goals per DAgger round of the cold start.",
)
@click.option(
    "--dagger-keep",
    type=click.Choice(["all", "mistakes"]),
    default="all",
    show_default=True,
    help="Labelled learner states a cold-start DAgger round keeps: all, or only those where the "
    "learner's action differs from the expert's (as `skillrl sft --dagger-keep`).",
)
@click.option(
    "--dagger-replay",
    type=click.FloatRange(0),
    default=None,
    help="Train each cold-start DAgger round on its new examples plus this many times as many "
    "drawn from earlier rounds (default: the whole aggregated dataset).",
)
@click.option(
    "--sft-lora-layers",
    type=click.IntRange(1),
    default=None,
    help="Adapt only the top N decoder layers in the cold start (default: all; as `skillrl sft "
    "--lora-layers`).",
)
@click.option(
    "--sft-epochs",
    type=click.FloatRange(0, min_open=True),
    default=2.0,
    show_default=True,
    help="Epochs of each cold-start fine-tuning round.",
)
@click.option(
    "--sft-learning-rate",
    type=click.FloatRange(0, min_open=True),
    default=2e-4,
    show_default=True,
    help="Learning rate of the cold start (a LoRA adapter, merged after each round).",
)
@click.option(
    "--init",
    "init_checkpoint",
    type=click.Path(file_okay=False),
    default=None,
    help="Start the run from this checkpoint folder (e.g. a `skillrl sft` round) instead of "
    "--model; not with --cold-start.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue the run from its last completed step, with the settings it was started with "
    "(saved in its config.json; only --cycles and --report-to may change).",
)
@env_option
@config_option
@workspace_option
@json_option
def train(**options: Any) -> None:
    """Run recursive improvement cycles: weights (GRPO) and skill bank improve together.

    Each cycle rolls out groups on training goals with per-turn retrieval, distills the
    episodes into the bank, applies one GRPO update with turn-level advantages, evaluates the
    fixed evaluation goals, evolves the bank from validation failures, and saves a bank
    snapshot and a safetensors checkpoint. Kill it at any time; --resume continues.

    With --backend trl-vllm --base-url URL, rollouts and evaluation are generated by a
    `trl vllm-serve --model M` server (GPU) started beforehand with the same model M as
    --model; the trained weights are pushed to it at the start and after every update.

    --config FILE takes the options from a YAML file (keys = option names); options on the
    command line override it. Every run saves its resolved settings in runs/<name>/config.json
    (--config runs/<name>/config.json repeats it).
    """
    ctx = click.get_current_context()
    settings = settle_training(ctx, options)  # every check, and a --cold-start, before GRPO loads
    from trainers.processes import Processes

    processes = Processes.current()  # under accelerate launch / torchrun: which process this is

    # The main process owns the run folder; every process stops if it refuses it. The run
    # saves its settings (these options with them) when it starts.
    sources = option_sources(ctx)
    processes.from_main(
        lambda: check_run_folder(
            settings.folder,
            settings.resume,
            settings.cycle,
            settings.grpo,
            settings.options,
            sources,
        )
    )
    state = run_with_progress(settings, processes)
    if settings.as_json and processes.is_main:
        click.echo(json.dumps(state.history, indent=2, sort_keys=True))
