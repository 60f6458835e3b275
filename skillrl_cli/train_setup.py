"""What ``skillrl train`` settles before it trains: its configs, its starting model, its folder.

The command's options are generated from the configs they set (:data:`TRAIN_OPTIONS`: the
cycle's, the update's, the prompt's, the cold start's and the launch's own fields), so each
option is a field with one name from the flag to its use. :func:`settle_training` builds those
configs once from click's values (after ``--resume`` filled the ones left at their defaults
from the run's saved options), applies the starting model's recorded settings with
``dataclasses.replace``, and returns one typed :class:`TrainSettings`; everything after it (the
folder claim, the policy, the bank, the cycles) reads that object. Every check fails fast,
before any model loads: a bad combination is a :class:`ConfigError`, a run folder that cannot
be started or resumed a :class:`CheckpointError`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from skillrl.prompts import PromptConfig
from skillrl_cli.config_options import OptionGroup, build, saved_values
from skillrl_cli.library import TrainSettings, training_policy_config
from skillrl_cli.options import (
    AUTO_MODEL,
    BASE_MODEL,
    DECODING_HELP,
    MODEL_HELP,
    check_decoding,
    env_config_from,
    recorded_settings,
    resolve_training_model,
)
from skillrl_cli.train_config import NOT_IN_FILE, fill_from_saved, option_sources
from skillrl_cli.train_session import run_folder
from skillrl_cli.upfront_checks import check_prompt_budget
from skillrl_core.errors import CheckpointError, ConfigError, ModelLoadError
from skillrl_core.option_fields import option
from skillrl_core.splits import TEST_SPLIT
from trainers.cold_start.sft_config import ColdStartConfig
from trainers.cycle.config import CycleConfig
from trainers.cycle.trackers import check_tracker_installed
from trainers.update.config import GRPOConfig

if TYPE_CHECKING:
    from skillrl.policies import PolicyConfig

MODEL_HELP_TRAIN = (
    f"The model GRPO starts from. {MODEL_HELP} A model that records the settings it was trained "
    "under (skillrl.json: skills, prompt budget, decoding, environment options) trains under "
    "them unless you give those options."
)


TRAIN_BACKENDS = ("transformers", "trl-vllm", "openai", "vllm")
"""What ``--backend`` accepts; openai and vllm are refused with the reason (they cannot train)."""


@dataclass(frozen=True)
class TrainLaunch:
    """How ``skillrl train`` starts: from which model, on which backend, into which folder."""

    model: str = option(BASE_MODEL, help=MODEL_HELP_TRAIN)
    init_checkpoint: str | None = option(
        None,
        help="Start the run from this checkpoint folder (e.g. a `skillrl sft` round) instead of "
        "--model; not with --cold-start.",
        aliases=("--init",),
    )
    cold_start: bool = option(
        False,
        help="First fine-tune the policy on expert turns of training goals (behaviour cloning, "
        "then --cold-start-dagger-rounds), as its own resumable phase in <run>/sft/; cycle 0 "
        "then evaluates the cold-started policy and GRPO starts from it (see `skillrl sft "
        "--help`).",
        show_default=False,
    )
    backend: str = option(
        "transformers",
        help="Rollout backend. transformers: the trained model itself generates. trl-vllm: a "
        "`trl vllm-serve` server generates (GPU) and gets the new weights after every update; "
        "the trained model still runs in-process. openai and vllm cannot train.",
        choices=TRAIN_BACKENDS,
    )
    base_url: str | None = option(
        None,
        help="Root of the `trl vllm-serve` server for --backend trl-vllm, e.g. "
        "http://127.0.0.1:8000 (required with it, not used otherwise).",
    )
    adapter_sync: bool = option(
        False,
        help="With --backend trl-vllm and --use-peft: send the server only the LoRA adapter "
        "after each update (vLLM loads it from this machine's disk by name) instead of the "
        "merged full weights over NCCL; serve with `vllm serve M --enable-lora "
        "--max-lora-rank R` and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True.",
        show_default=False,
    )
    constrained: bool | None = option(None, help=DECODING_HELP, negative="--free")
    threads: int | None = option(None, help="CPU threads for torch.", low=1)
    run_name: str | None = option(
        None, help="Run folder name under <workspace>/runs/ (default: the environment id)."
    )
    resume: bool = option(
        False,
        help="Continue the run from its last completed step, with the settings it was started "
        "with (saved in its config.json; only --cycles, --report-to and --merged-checkpoints "
        "may change).",
        show_default=False,
    )


CYCLE_OPTIONS = OptionGroup(CycleConfig)
GRPO_OPTIONS = OptionGroup(GRPOConfig)
PROMPT_OPTIONS = OptionGroup(PromptConfig)
LAUNCH_OPTIONS = OptionGroup(TrainLaunch)
COLD_START_OPTIONS = OptionGroup(
    ColdStartConfig,
    prefix="cold_start",
    only=(
        "goals",
        "dagger_rounds",
        "dagger_goals",
        "dagger_keep",
        "dagger_replay",
        "lora_layers",
        "num_train_epochs",
        "learning_rate",
    ),
    defaults={"dagger_rounds": 1},
    helps={
        "goals": "Training goals the expert plays for the cold start's behaviour cloning.",
        "dagger_rounds": "DAgger rounds of the cold start (policy rolls out, expert labels, "
        "train again).",
        "dagger_goals": "Training goals per DAgger round of the cold start.",
        "lora_layers": "Adapt only the top N decoder layers in the cold start (default: all; as "
        "`skillrl sft --lora-layers`).",
        "num_train_epochs": "Epochs of each cold-start fine-tuning round.",
        "learning_rate": "Learning rate of the cold start (a LoRA adapter, merged after each "
        "round).",
    },
    aliases={
        "dagger_rounds": ("--dagger-rounds",),
        "dagger_goals": ("--dagger-goals",),
        "dagger_keep": ("--dagger-keep",),
        "dagger_replay": ("--dagger-replay",),
        "lora_layers": ("--sft-lora-layers",),
        "num_train_epochs": ("--sft-epochs",),
        "learning_rate": ("--sft-learning-rate",),
    },
)
"""The cold start's settings ``train --cold-start`` offers (as ``skillrl sft``'s, prefixed);
the rest (skills, decoding, turns, seed) it takes from the run."""

TRAIN_OPTIONS = (CYCLE_OPTIONS, GRPO_OPTIONS, PROMPT_OPTIONS, LAUNCH_OPTIONS, COLD_START_OPTIONS)
"""Every option ``skillrl train`` takes from a config, in ``--help`` order."""


def settle_training(ctx: click.Context, values: dict[str, Any]) -> TrainSettings:
    """Build the configs of ``skillrl train`` from click's values, checking each on the way.

    Order matters: the run's saved options (``--resume``) fill the values left at their
    defaults first; then the configs are built, the starting model's recorded settings apply to
    those the user left at their defaults, every check runs, and the cold start
    (``--cold-start``), the one costly step, comes last, so a typo never waits for it.
    """
    env_id = values["env_id"]
    run_name = env_id if values["run_name"] is None else values["run_name"]  # "" is refused
    folder = run_folder(values["workspace"], run_name)
    if values["resume"]:
        fill_from_saved(ctx, values, folder)  # click's side: options left at their defaults
    launch = dataclasses.replace(build(LAUNCH_OPTIONS, values), run_name=run_name)
    check_backend(launch)
    if launch.resume:
        check_saved_model(ctx, launch, folder)
    cycle = build(
        CYCLE_OPTIONS,
        values,
        env_config=env_config_from(env_id, values["env_options"]),
        rollout_dtype=rollout_dtype_for(values["rollout_dtype"], launch.backend),
    )
    check_tracker_installed(cycle.report_to)  # a missing extra fails before a model is read
    prompt = build(PROMPT_OPTIONS, values)
    initialised = launch.init_checkpoint is not None
    # The run's opening lines name the model; resolving says it too only for 'auto', where it
    # also says why that model was chosen.
    model = resolve_training_model(
        launch.model,
        launch.backend,
        values["workspace"],
        env_id,
        quiet=initialised or launch.model != AUTO_MODEL,
    )
    # Saved as given ("shipped", not the package's path), so a resume after the package moved
    # (another venv, a reinstall) resolves it again and finds the same adapter; "auto" is saved
    # as what it found, so a resume never picks up a checkpoint the run itself wrote since.
    given_model = model if launch.model == AUTO_MODEL else launch.model
    launch = dataclasses.replace(launch, model=model)
    if not launch.resume and not launch.cold_start:  # a resumed run keeps its saved settings
        cycle, prompt, launch = take_model_settings(ctx, cycle, prompt, launch)
    if launch.resume:
        cycle = kept_model_settings(cycle, folder)
    constrained = check_decoding(launch.backend, launch.constrained)
    launch = dataclasses.replace(launch, constrained=constrained)
    grpo = build(
        GRPO_OPTIONS,
        values,
        lora_alpha=2 * values["lora_r"],
        max_completion_length=cycle.max_new_tokens,
    )
    cold_start = build(
        COLD_START_OPTIONS,
        values,
        env_id=env_id,
        skills=cycle.skills,
        constrained=constrained,
        max_turns=cycle.max_turns,
        max_new_tokens=cycle.max_new_tokens,
        seed=cycle.seed,
    )
    if launch.adapter_sync and not grpo.use_peft:
        raise ConfigError(
            "--adapter-sync sends the server a LoRA adapter: add --use-peft, or drop --adapter-sync"
        )
    check_prompt_budget(env_id, prompt.max_prompt_tokens)
    check_goals(cycle)
    options = {
        **saved_values(CYCLE_OPTIONS, cycle),
        **saved_values(GRPO_OPTIONS, grpo),
        **saved_values(PROMPT_OPTIONS, prompt),
        **saved_values(LAUNCH_OPTIONS, dataclasses.replace(launch, model=given_model), NOT_IN_FILE),
        **saved_values(COLD_START_OPTIONS, cold_start),
        "env-option": dict(cycle.env_config),
    }
    # The folder is claimed before a cold start writes <run>/sft/ into it. The main process
    # checks it and every process stops if it refuses (under a launcher).
    from trainers.cycle.processes import Processes

    sources = option_sources(ctx)
    Processes.current().from_main(
        lambda: check_run_folder(
            folder, launch.resume, cycle, grpo, options, sources, cold_start=launch.cold_start
        )
    )
    # A cold start trains here: every check comes first.
    model = starting_model(
        launch, cold_start, prompt, cycle, folder, values["workspace"], values["as_json"]
    )
    return TrainSettings(
        cycle=cycle,
        grpo=grpo,
        policy=training_policy_config(model, values["workspace"], launch.threads),
        server=server_config(launch, model, values["workspace"]),
        prompt=prompt,
        constrained=constrained,
        folder=folder,
        resume=launch.resume,
        options=options,
    )


AUTO_ROLLOUT_DTYPE = "auto"
"""``--rollout-dtype auto``: bf16 where this machine computes it natively, else float32."""


def rollout_dtype_for(choice: str, backend: str) -> str:
    """Resolve ``--rollout-dtype`` (auto: saved as what it became, so a resume repeats it)."""
    if choice == AUTO_ROLLOUT_DTYPE:
        return native_rollout_dtype() if backend != "trl-vllm" else "float32"
    if backend == "trl-vllm" and choice != "float32":
        raise ConfigError(
            "--rollout-dtype is for in-process rollouts; with --backend trl-vllm the server's "
            "own --dtype decides"
        )
    return choice


def check_saved_model(ctx: click.Context, launch: TrainLaunch, folder: Path) -> None:
    """On ``--resume``, refuse a starting model taken from the run's ``config.json`` that is gone.

    The refusal says where the path came from: the user did not type it on this command line.
    """
    from click.core import ParameterSource

    from skillrl.policies.model_folders import check_model_path
    from trainers.cycle.run_files import RunFiles

    saved_in = RunFiles(folder).config_path
    for name, flag in (("init_checkpoint", "--init"), ("model", "--model")):
        value = getattr(launch, name)
        if value is None or ctx.get_parameter_source(name) is not ParameterSource.DEFAULT:
            continue  # not saved, or given on this command line
        try:
            if name == "init_checkpoint" and not Path(value).expanduser().is_dir():
                raise ModelLoadError(f"{flag} ({value}): no such checkpoint folder")
            check_model_path(value)
        except ModelLoadError as error:
            raise ModelLoadError(
                f"{error}; that {flag} was saved in {saved_in}, which --resume continues from: "
                "put it back there, or start a new run (another --run-name)"
            ) from error


def check_backend(launch: TrainLaunch) -> None:
    """Refuse backends that cannot train and a ``--base-url`` no backend uses."""
    if launch.backend in ("openai", "vllm"):
        raise ConfigError(
            f"--backend {launch.backend} cannot train: GRPO updates the weights in-process and "
            "this backend cannot receive them; use --backend transformers, or --backend "
            "trl-vllm with a `trl vllm-serve` server"
        )
    if launch.backend != "trl-vllm" and launch.base_url is not None:
        raise ConfigError("--base-url is only used with --backend trl-vllm")
    if launch.backend != "trl-vllm" and launch.adapter_sync:
        raise ConfigError("--adapter-sync is only used with --backend trl-vllm")


def native_rollout_dtype() -> str:
    """``bfloat16`` on a GPU with bf16 or a CPU with native bf16 units, else ``float32``.

    The same test ``--dtype auto`` plays by (``pick_dtype``): emulated bf16 was about 5x slower
    than float32 on an AVX2 CPU, and 1.9x faster with AMX (docs/results.md).
    """
    import torch

    from skillrl.policies.transformers_loading import pick_device, pick_dtype

    native = pick_dtype("auto", pick_device("auto")) == torch.bfloat16
    return "bfloat16" if native else "float32"


def server_config(launch: TrainLaunch, model: str, workspace: str | None) -> PolicyConfig | None:
    """Return the rollout server's policy config (``--backend trl-vllm``); None: in-process.

    ``model`` is the starting model, which the server must serve too.
    """
    if launch.backend != "trl-vllm":
        return None
    from skillrl.policies import PolicyConfig
    from skillrl.workspace import resolve_workspace

    return PolicyConfig(
        backend="trl-vllm",
        model=model,
        base_url=launch.base_url,
        adapter_sync=launch.adapter_sync,
        workspace=resolve_workspace(workspace),
    )


def take_model_settings(
    ctx: click.Context, cycle: CycleConfig, prompt: PromptConfig, launch: TrainLaunch
) -> tuple[CycleConfig, PromptConfig, TrainLaunch]:
    """Apply the starting model's recorded settings to the options left at their defaults.

    The model GRPO starts from (``--init`` or ``--model``) may carry ``skillrl.json``: the
    skills setting, prompt budget, decoding and environment options it was trained under. Each
    option left at its default takes the recorded value, as ``skillrl run`` does, and the screen
    says which.
    """
    from rich.console import Console

    taken = recorded_settings(
        launch.init_checkpoint or launch.model,
        ctx,
        Console(stderr=True),
        env_id=cycle.env_id,
        backend=launch.backend,
        env_options=cycle.env_config,
    )
    if taken is None:
        return cycle, prompt, launch
    skills = cycle.skills if taken.skills is None else taken.skills
    cycle = dataclasses.replace(
        cycle,
        skills=skills,
        distill=skills,
        evolve=skills,
        env_config=env_config_from(cycle.env_id, taken.env_options),
    )
    if taken.max_prompt_tokens is not None:
        prompt = dataclasses.replace(prompt, max_prompt_tokens=taken.max_prompt_tokens)
    if taken.constrained is not None:
        launch = dataclasses.replace(launch, constrained=taken.constrained)
    return cycle, prompt, launch


def kept_model_settings(cycle: CycleConfig, folder: Path) -> CycleConfig:
    """On resume: the settings the run took from its model at launch that no option sets.

    A model that records ``"skills": false`` turned distillation and evolution off
    (:func:`take_model_settings`); no option says so again on resume, so they are read back from
    the run's ``config.json`` rather than left at the config's defaults.
    """
    from trainers.cycle.run_files import RunFiles
    from trainers.cycle.run_settings import saved_cycle_config

    saved = saved_cycle_config(RunFiles(folder))
    if saved is None:
        return cycle
    return dataclasses.replace(cycle, distill=saved.distill, evolve=saved.evolve)


def starting_model(
    launch: TrainLaunch,
    cold_start: ColdStartConfig,
    prompt: PromptConfig,
    cycle: CycleConfig,
    folder: Path,
    workspace: str | None,
    as_json: bool,
) -> str:
    """Return the model GRPO starts from: --init, the cold-started one, or --model."""
    if launch.init_checkpoint is not None and launch.cold_start:
        raise ConfigError("--init and --cold-start both choose the starting model: pick one")
    if launch.cold_start and launched_processes() > 1:
        raise ConfigError(
            "--cold-start runs in one process: run `skillrl sft` (or `skillrl train "
            "--cold-start --cycles 1`) without the launcher first, then launch `skillrl train "
            "--init <its checkpoint>`"
        )
    from skillrl.policies.model_folders import check_model_folder, check_model_path

    if launch.init_checkpoint is not None:
        init = Path(launch.init_checkpoint).expanduser()
        if not init.is_dir():
            raise ModelLoadError(f"--init ({init}): no such checkpoint folder")
        check_model_folder(init)  # what the folder lacks, before the model loads
        return str(init)
    check_model_path(launch.model)
    if not launch.cold_start:
        return launch.model
    from skillrl_cli.sft import ColdStartJob, run_cold_start

    job = ColdStartJob(
        config=cold_start,
        policy=training_policy_config(launch.model, workspace, launch.threads),
        prompt=prompt,
        env_options=dict(cycle.env_config),
        teacher=None,
        folder=folder / "sft",
        resume=launch.resume,
        as_json=as_json,
    )
    return str(run_cold_start(job))


def check_goals(cycle: CycleConfig) -> None:
    """Refuse splits the run plays that do not exist, are empty or hold too few goals."""
    from skillrl_cli.upfront_checks import check_goal_count, split_size

    env_id, env_config = cycle.env_id, cycle.env_config
    split_size(env_id, env_config, cycle.train_split, "the training split")
    eval_goals = (cycle.eval_split, cycle.eval_goals, "--eval-goals", "--eval-split")
    evolve = cycle.evolve_goals
    validation_goals = (
        cycle.validation_split,
        cycle.validation_goals + (evolve.first if evolve is not None else 0),
        "--validation-goals" + (" after the --eval-goals" if evolve and evolve.first else ""),
        "the validation split",
    )
    test_goals = (TEST_SPLIT, cycle.test_goals, "--test-goals", "the test split")
    for split, count, count_option, split_option in (eval_goals, validation_goals, test_goals):
        check_goal_count(env_id, env_config, split, count, count_option, split_option)


def launched_processes() -> int:
    """How many processes the launcher started (its WORLD_SIZE), read before the group starts."""
    import os

    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def check_run_folder(
    folder: Path,
    resume: bool,
    cycle: Any,
    grpo: Any,
    options: dict[str, Any] | None = None,
    sources: dict[str, str] | None = None,
    *,
    cold_start: bool = False,
) -> None:
    """Refuse, before any model loads, a fresh start over a run or a resume that cannot go on.

    A resume of nothing, of a damaged run, or with settings other than the run's (all but
    --cycles; ``sources`` says where each option came from) is refused. With ``cold_start``, a
    resume of a run whose cold start (``<run>/sft/``) began but whose cycles never did goes on.
    """
    from trainers.cycle.run_files import RunFiles
    from trainers.cycle.run_settings import check_resume_settings, check_saved_cycle

    files = RunFiles(folder)
    _check_writable(folder)
    exists = files.exists()
    if resume and not exists:
        if cold_start and (folder / "sft").is_dir():
            return  # the cold start resumes; the cycles start afresh after it
        raise CheckpointError(f"--resume: there is no run to continue in {folder}")
    if resume:
        state = files.load_state()  # a damaged state.json fails now, not after the model loads
        check_resume_settings(files, cycle, grpo, options, sources)
        check_saved_cycle(files, state)
    if not resume and exists:
        raise CheckpointError(
            f"{folder} already holds a run; pass --resume to continue it "
            "or choose another --run-name"
        )


def _check_writable(folder: Path) -> None:
    """Refuse, at the start, a run folder whose parent cannot be written (not at the first save).

    Nothing is created: a temp file is tried in the nearest folder on the way that exists (a
    later check may still refuse the run, and a refusal leaves the workspace as it was).
    """
    import tempfile

    existing = folder.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(f"{existing} is not a folder")
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        raise CheckpointError(
            f"cannot write the run folder {folder}: {error.strerror or error}; training writes "
            "its state and checkpoints there, so give a writable --workspace"
        ) from error
