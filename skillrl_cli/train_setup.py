"""What ``skillrl train`` settles before it trains: its configs, its starting model, its folder.

:func:`settle_training` turns the command's option values (``o``, keyed by option name:
click's values, then the run's saved options on ``--resume`` and the starting model's
recorded settings) into one typed :class:`TrainSettings`, once; everything after it (the
folder claim, the policy, the bank, the cycles) reads that object. Every check fails fast,
before any model loads: a bad combination is a :class:`ConfigError`, a run folder that cannot
be started or resumed a :class:`CheckpointError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from skillrl_cli.options import constrained_from, env_config_from, prompt_config_from
from skillrl_cli.train_config import fill_from_saved, resolved_settings
from skillrl_cli.train_session import TrainSettings, run_folder, training_policy_config
from skillrl_cli.upfront_checks import check_prompt_budget
from skillrl_core.errors import CheckpointError, ConfigError, ModelLoadError
from trainers.config import CycleConfig, GRPOConfig
from trainers.trackers import check_tracker_installed

if TYPE_CHECKING:
    from skillrl.policies import PolicyConfig


def settle_training(ctx: click.Context, o: dict[str, Any]) -> TrainSettings:
    """Resolve the options of ``skillrl train`` into its settings, checking each on the way.

    Order matters: the run's saved options (``--resume``) or the starting model's recorded
    settings fill the options left at their defaults first; then every check runs; the cold
    start (``--cold-start``), the one costly step, comes last, so a typo never waits for it.
    """
    if o["run_name"] is None:  # the default folder is named after the env; "" is refused
        o["run_name"] = o["env_id"]
    folder = run_folder(o["workspace"], o["run_name"])
    if o["resume"]:
        fill_from_saved(ctx, o, folder)
    check_tracker_installed(o["report_to"])  # a missing extra fails before any model is read
    given_model = o["model"]
    if o["resume"]:
        resolve_shipped_model(o)  # the settings were taken when the run started
    else:
        take_model_settings(o, ctx)
    # Everything below up to the model load is cheap: a typo fails in a second.
    env_config = env_config_from(o["env_id"], o["env_options"])
    if o["backend"] in ("openai", "vllm"):
        raise ConfigError(
            f"--backend {o['backend']} cannot train: GRPO updates the weights in-process and "
            "this backend cannot receive them; use --backend transformers, or --backend "
            "trl-vllm with a `trl vllm-serve` server"
        )
    if o["backend"] != "trl-vllm" and o["base_url"] is not None:
        raise ConfigError("--base-url is only used with --backend trl-vllm")
    if o["rollout_dtype"] == AUTO_ROLLOUT_DTYPE:  # saved as what it became: a resume repeats it
        o["rollout_dtype"] = native_rollout_dtype() if o["backend"] != "trl-vllm" else "float32"
    if o["backend"] == "trl-vllm" and o["rollout_dtype"] != "float32":
        raise ConfigError(
            "--rollout-dtype is for in-process rollouts; with --backend trl-vllm the server's "
            "own --dtype decides"
        )
    o["constrained"] = constrained_from(o)
    cycle, grpo = cycle_config_from(o, env_config), grpo_config_from(o)
    check_prompt_budget(o["env_id"], o["max_prompt_tokens"])
    check_goals(cycle)
    options = resolved_settings(ctx, o)
    if given_model == SHIPPED_MODEL:
        # Saved as named, not as the package's path: a resume after the package moved (another
        # venv, a reinstall) resolves it again and finds the same adapter.
        options["model"] = SHIPPED_MODEL
    model = starting_model(o)  # a cold start trains here: every check comes first
    return TrainSettings(
        cycle=cycle,
        grpo=grpo,
        policy=training_policy_config(model, o["workspace"], o["threads"]),
        server=server_config(o, model),
        prompt=prompt_config_from(o),
        constrained=o["constrained"],
        folder=folder,
        resume=o["resume"],
        as_json=o["as_json"],
        options=options,
    )


AUTO_ROLLOUT_DTYPE = "auto"
"""``--rollout-dtype auto``: bf16 where this machine computes it natively, else float32."""


def native_rollout_dtype() -> str:
    """``bfloat16`` on a GPU with bf16 or a CPU with native bf16 units, else ``float32``.

    The same test ``--dtype auto`` plays by (``pick_dtype``): emulated bf16 was about 5x slower
    than float32 on an AVX2 CPU, and 1.9x faster with AMX (docs/results.md).
    """
    import torch

    from skillrl.policies.transformers_loading import pick_device, pick_dtype

    native = pick_dtype("auto", pick_device("auto")) == torch.bfloat16
    return "bfloat16" if native else "float32"


def server_config(o: dict[str, Any], model: str) -> PolicyConfig | None:
    """Return the rollout server's policy config (``--backend trl-vllm``); None: in-process.

    ``model`` is the starting model, which the server must serve too.
    """
    if o["backend"] != "trl-vllm":
        return None
    from skillrl.policies import PolicyConfig
    from skillrl.workspace import resolve_workspace

    return PolicyConfig(
        backend="trl-vllm",
        model=model,
        base_url=o["base_url"],
        workspace=resolve_workspace(o["workspace"]),
    )


def cycle_config_from(o: dict[str, Any], env_config: dict[str, Any]) -> CycleConfig:
    """Return the improvement cycle's settings (goals, turns, skills, sampling, shaping)."""
    return CycleConfig(
        env_id=o["env_id"],
        cycles=o["cycles"],
        goals_per_cycle=o["goals_per_cycle"],
        group_size=o["group_size"],
        eval_goals=o["eval_goals"],
        eval_split=o["eval_split"],
        eval_every=o["eval_every"],
        validation_goals=o["validation_goals"],
        max_turns=o["max_turns"],
        skills=o["skills"],
        distill=o["skills"],
        evolve=o["skills"],
        dynamic_sampling=o["dynamic_sampling"],
        max_topup_rounds=o["max_topup_rounds"],
        seed=o["seed"],
        max_new_tokens=o["max_new_tokens"],
        rollout_dtype=o["rollout_dtype"],
        invalid_action_penalty=o["invalid_penalty"],
        turn_cost=o["turn_cost"],
        env_config=env_config,
        report_to=o["report_to"],
    )


def grpo_config_from(o: dict[str, Any]) -> GRPOConfig:
    """Return the GRPO update's settings (learning rate, clip, KL, batches, LoRA, compile)."""
    return GRPOConfig(
        learning_rate=o["learning_rate"],
        beta=o["beta"],
        epsilon=o["epsilon"],
        epsilon_high=o["epsilon_high"],
        loss_type=o["loss_type"],
        num_iterations=o["num_iterations"],
        per_device_train_batch_size=o["batch_size"],
        gradient_accumulation_steps=o["grad_accum"],
        whole_group_steps=o["whole_groups"],
        step_weight=o["step_weight"],
        estimator=o["estimator"],
        rft_weight=o["rft_weight"],
        gamma=o["gamma"],
        temperature=o["temperature"],
        use_peft=o["use_lora"],
        lora_r=o["lora_r"],
        lora_alpha=2 * o["lora_r"],
        max_completion_length=o["max_new_tokens"],
        bf16=o["bf16"],
        torch_compile=o["torch_compile"],
    )


SHIPPED_MODEL = "shipped"
"""``--model shipped``: the cold-started adapter the package ships for ``--env``."""


def resolve_shipped_model(o: dict[str, Any]) -> None:
    """Replace ``--model shipped`` by the path of the adapter the package ships for ``--env``."""
    from skillrl.policies.model_settings import shipped_adapter

    if o["model"] == SHIPPED_MODEL:
        shipped = shipped_adapter(o["env_id"])
        if shipped is None:
            raise ConfigError(f"--model shipped: no adapter ships for environment {o['env_id']!r}")
        o["model"] = str(shipped)


def take_model_settings(o: dict[str, Any], ctx: Any) -> None:
    """Resolve ``--model shipped`` and apply the starting model's recorded settings to ``o``.

    The model GRPO starts from (``--init`` or ``--model``; a ``--cold-start`` makes its own)
    may carry ``skillrl.json``: the skills setting, prompt budget, decoding and environment
    options it was trained under. Each option left at its default takes the recorded value, as
    ``skillrl run`` does, and the screen says which. A resumed run keeps its saved settings.
    """
    from rich.console import Console

    from skillrl_cli.options import model_settings_for

    resolve_shipped_model(o)
    if o["cold_start"]:
        return
    model_settings_for(o["init_checkpoint"] or o["model"], o, ctx, Console(stderr=True), "skills")


def starting_model(o: dict[str, Any]) -> str:
    """Return the model GRPO starts from: --init, the cold-started one, or --model."""
    if o["init_checkpoint"] is not None and o["cold_start"]:
        raise ConfigError("--init and --cold-start both choose the starting model: pick one")
    if o["cold_start"] and launched_processes() > 1:
        raise ConfigError(
            "--cold-start runs in one process: run `skillrl sft` (or `skillrl train "
            "--cold-start --cycles 1`) without the launcher first, then launch `skillrl train "
            "--init <its checkpoint>`"
        )
    from skillrl.policies.model_folders import check_model_folder, check_model_path

    if o["init_checkpoint"] is not None:
        folder = Path(o["init_checkpoint"]).expanduser()
        if not folder.is_dir():
            raise ModelLoadError(f"--init ({folder}): no such checkpoint folder")
        check_model_folder(folder)  # what the folder lacks, before the model loads
        return str(folder)
    check_model_path(o["model"])
    if not o["cold_start"]:
        return o["model"]
    from skillrl_cli.sft import cold_start_job, run_cold_start
    from trainers.sft_config import ColdStartConfig

    config = ColdStartConfig(
        env_id=o["env_id"],
        goals=o["cold_start_goals"],
        dagger_rounds=o["dagger_rounds"],
        dagger_goals=o["dagger_goals"],
        dagger_keep=o.get("dagger_keep", "all"),
        dagger_replay=o.get("dagger_replay"),
        lora_layers=o.get("sft_lora_layers"),
        skills=o["skills"],
        constrained=o["constrained"],
        max_turns=o["max_turns"],
        max_new_tokens=o["max_new_tokens"],
        num_train_epochs=o["sft_epochs"],
        learning_rate=o["sft_learning_rate"],
        seed=o["seed"],
    )
    folder = run_folder(o["workspace"], o["run_name"]) / "sft"
    return str(run_cold_start(cold_start_job(o, config, folder)))


def check_goals(cycle: CycleConfig) -> None:
    """Refuse splits the run plays that do not exist, are empty or hold too few goals."""
    from skillrl_cli.upfront_checks import check_goal_count, split_size

    env_id, env_config = cycle.env_id, cycle.env_config
    split_size(env_id, env_config, cycle.train_split, "the training split")
    eval_goals = (cycle.eval_split, cycle.eval_goals, "--eval-goals", "--eval-split")
    validation_goals = (
        cycle.validation_split,
        cycle.validation_goals,
        "--validation-goals",
        "the validation split",
    )
    for split, count, count_option, split_option in (eval_goals, validation_goals):
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
) -> None:
    """Refuse, before any model loads, a fresh start over a run or a resume that cannot go on.

    A resume of nothing, of a damaged run, or with settings other than the run's (all but
    --cycles; ``sources`` says where each option came from) is refused.
    """
    from trainers.run_files import RunFiles
    from trainers.run_settings import check_resume_settings

    files = RunFiles(folder)
    _check_writable(folder)
    exists = files.exists()
    if resume and not exists:
        raise CheckpointError(f"--resume: there is no run to continue in {folder}")
    if resume:
        files.load_state()  # a damaged state.json fails now, not after the model loads
        check_resume_settings(files, cycle, grpo, options, sources)
    if not resume and exists:
        raise CheckpointError(
            f"{folder} already holds a run; pass --resume to continue it "
            "or choose another --run-name"
        )


def _check_writable(folder: Path) -> None:
    """Refuse, at the start, a run folder whose parent cannot be written (not at the first save)."""
    import tempfile

    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder.parent):
            pass
    except OSError as error:
        raise CheckpointError(
            f"cannot write the run folder {folder}: {error.strerror or error}; training writes "
            "its state and checkpoints there, so give a writable --workspace"
        ) from error
