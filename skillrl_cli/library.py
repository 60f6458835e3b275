"""The Python entry points under the commands: train a policy with its bank, evaluate a model.

``skillrl train`` builds a :class:`TrainSettings` from its options, wires its progress bars to
a :class:`TrainWatch` and the run's typed events, calls :func:`train` and prints the
:class:`TrainResult`; ``skillrl eval`` does the same with :class:`EvalSettings`,
:func:`evaluate_model` and :class:`EvalReport`. A script or a notebook calls them the same way,
without click or rich. Each does what its command does once the settings are checked:
:func:`train` loads the policy (and the rollout server's, or a bf16 copy), opens the
workspace's bank, builds the runners and the distiller, and runs (or resumes)
:class:`~trainers.cycle.TrainingRun`; :func:`evaluate_model` loads the model and plays the same
goals in each skills arm (:func:`trainers.evaluate.evaluate`), then compares the arms.

It lives in the CLI layer because it wires every layer below it (the runtime's policies and
bank access with the trainers); the runtime never imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envs.registry import DEFAULT_ENV
from skillrl.prompts import PromptConfig
from skillrl_cli.bank_access import open_bank
from skillrl_core.errors import ConfigError

if TYPE_CHECKING:
    from skillrl.policies import PolicyConfig
    from trainers.checkpoint_choice import RunChoice
    from trainers.config import CycleConfig, GRPOConfig
    from trainers.cycle_metrics import CycleMetrics
    from trainers.evaluate import ArmComparison, EvalConfig, EvalResult
    from trainers.phased_run import RunEvents
    from trainers.policy_rollouts import RolloutProgress
    from trainers.processes import Processes
    from trainers.run_files import RunFiles, RunState


@dataclass(frozen=True)
class TrainSettings:
    """Everything a training run uses, settled once (``skillrl train`` builds it from options)."""

    cycle: CycleConfig
    """The improvement cycles: goals, turns, skills, sampling, evaluation, reward shaping."""
    grpo: GRPOConfig
    """The GRPO update: learning rate, clip, KL, batches, LoRA, temperature, step weight."""
    policy: PolicyConfig
    """The in-process policy GRPO trains (transformers, fp32; :func:`training_policy_config`),
    loaded from the starting model: ``--init``, the cold-started checkpoint, or ``--model``."""
    folder: Path
    """The run folder, ``<workspace>/runs/<run name>``."""
    server: PolicyConfig | None = None
    """The rollout server's policy (``--backend trl-vllm``); None: the trained policy rolls out."""
    prompt: PromptConfig = field(default_factory=PromptConfig)
    """How each turn's prompt is built (its token budget)."""
    constrained: bool = True
    """Constrained decoding (clicks chosen among the admissible ones) or free."""
    resume: bool = False
    """Continue the run in ``folder`` instead of starting one."""
    as_json: bool = False
    """The command prints the metrics as JSON on stdout (progress on stderr); :func:`train`
    does not read it."""
    options: dict[str, Any] | None = None
    """The command's resolved options (option name -> plain value): the run saves them in its
    ``config.json``, where ``--resume`` and ``--config`` read them back. None (a library
    caller's run): a resume is checked against the saved configs alone."""

    @property
    def workspace(self) -> Path:
        """The workspace folder (skill bank, runs)."""
        return self.policy.workspace


@dataclass(frozen=True)
class TrainWatch:
    """How a caller follows a training run besides its phase events; every callback optional."""

    rollout: Callable[[RolloutProgress], None] | None = None
    """Called as episodes and turns of a rollout or an evaluation are played."""
    optimizer_steps: Callable[[int, int], None] | None = None
    """Called as ``(done, total)`` after every optimizer step of an update."""
    turns_trained: Callable[[int, int], None] | None = None
    """Called as ``(done, total)`` after every backward: the turns trained inside a step."""
    cycle_saved: Callable[[CycleMetrics], None] | None = None
    """Called on the main process with what a cycle measured, once its row is saved."""


@dataclass(frozen=True)
class TrainResult:
    """What a training run leaves: its final state, its choice of cycle, its files."""

    state: RunState
    """The run's final state; ``state.history`` holds every cycle's metrics row."""
    choice: RunChoice | None
    """The cycle the run kept (``best.json``); None when it chooses no checkpoint."""
    files: RunFiles
    """The run folder's files: ``metrics_path``, ``curve_path``, checkpoints, ``state.json``."""

    @property
    def history(self) -> list[dict[str, Any]]:
        """Every cycle's metrics row, cycle 0 first (as ``metrics.jsonl`` holds them)."""
        return self.state.history

    @property
    def folder(self) -> Path:
        """The run folder."""
        return self.files.root


def train(
    settings: TrainSettings,
    *,
    events: RunEvents | None = None,
    watch: TrainWatch | None = None,
    processes: Processes | None = None,
) -> TrainResult:
    """Run (or, with ``settings.resume``, continue) the improvement cycles of a training run.

    ``events`` receives the run's typed phase events (:mod:`trainers.phased_run`), ``watch``
    its finer progress. Under a launcher (``processes``, default: this process's place) the
    main process opens the model and the bank first (it may download the model or seed the
    bank), the others after it. The policy and the bank are closed on the way out.
    """
    from skillrl.policies import load_policy
    from skillrl.rollout import RolloutStats
    from trainers.cycle import TrainingRun
    from trainers.phased_run import PhaseEnded, RunEvents
    from trainers.policy_rollouts import PolicyRollouts
    from trainers.processes import Processes
    from trainers.run_files import CyclePhase

    processes = processes or Processes.current()
    events = events or RunEvents()
    watch = watch or TrainWatch()
    cycle = settings.cycle
    with processes.main_first():
        policy = load_policy(settings.policy)
        rollout_policy = rollout_policy_for(settings, policy)
        bank = open_bank(settings.workspace, cycle.env_id) if cycle.skills else None
    try:
        runner = PolicyRollouts(
            rollout_policy,
            env_id=cycle.env_id,
            env_config=dict(cycle.env_config),
            bank=bank,
            max_turns=cycle.max_turns,
            max_new_tokens=cycle.max_new_tokens,
            constrained=settings.constrained,
            prompt_config=settings.prompt,
            on_progress=watch.rollout,
        )
        # Evaluation and validation play the trained float32 weights, whatever the rollouts
        # play in (a server's own rollouts evaluate there, as they always have).
        eval_runner = (
            replace(runner, policy=policy, timings=RolloutStats())
            if cycle.rollout_dtype != "float32"
            else runner
        )
        run = TrainingRun(
            cycle,
            settings.grpo,
            policy=policy,
            runner=runner,
            eval_runner=eval_runner,
            run_dir=settings.folder,
            bank=bank,
            distiller=make_distiller() if bank is not None else None,
            events=events,
            processes=processes,
            options=settings.options,
            base_model=settings.policy.model,
        )
        run.trainer.on_progress, run.trainer.on_turns = watch.optimizer_steps, watch.turns_trained
        cycle_saved = watch.cycle_saved
        if cycle_saved is not None and processes.is_main:

            def saved(event: PhaseEnded) -> None:
                if event.phase is CyclePhase.SAVE and run.metrics is not None:
                    cycle_saved(run.metrics)

            events.on(PhaseEnded, saved)
        # A run whose cold start finished but whose cycles never began has no state yet.
        state = run.run(resume=settings.resume and run.files.exists())
        return TrainResult(state=state, choice=run.files.load_choice(), files=run.files)
    finally:
        if bank is not None:
            bank.close()
        close = getattr(rollout_policy, "close", None)
        if rollout_policy is not policy and close is not None:
            close()


@dataclass(frozen=True)
class EvalSettings:
    """What :func:`evaluate_model` plays: a model, its goals, and the skills arms to compare."""

    policy: PolicyConfig
    """The model evaluated (``skillrl eval`` plays float32 unless told otherwise)."""
    config: EvalConfig
    """The goals (split and range), the samples and the Pass@(K,T) grid."""
    env_id: str = DEFAULT_ENV
    """The environment played."""
    env_config: dict[str, Any] = field(default_factory=dict)
    """The environment's settings (``--env-option``)."""
    arms: tuple[str, ...] = ("on", "off")
    """Skills arms played on the same goals, the first the baseline of the comparisons:
    ``on``, ``placebo``, ``off`` (:data:`skillrl.skill_arms.SKILL_ARMS`)."""
    max_turns: int = 15
    """Turn limit per episode."""
    max_new_tokens: int = 48
    """Tokens the policy may generate per turn."""
    constrained: bool = True
    """Constrained decoding (clicks chosen among the admissible ones) or free."""
    prompt: PromptConfig = field(default_factory=PromptConfig)
    """How each turn's prompt is built (its token budget)."""

    def __post_init__(self) -> None:
        # Checked here, not after the model has loaded.
        from skillrl.skill_arms import SKILL_ARMS

        unknown = [arm for arm in self.arms if arm not in SKILL_ARMS]
        if not self.arms or unknown or len(set(self.arms)) != len(self.arms):
            raise ConfigError(
                f"arms ({self.arms!r}) must name each of {', '.join(SKILL_ARMS)} at most once, "
                "and at least one"
            )

    @property
    def workspace(self) -> Path:
        """The workspace folder (its skill bank)."""
        return self.policy.workspace


@dataclass(frozen=True)
class EvalWatch:
    """How a caller follows an evaluation; every callback optional."""

    arm_started: Callable[[str], None] | None = None
    """Called with an arm's name before its goals are played."""
    arm_ended: Callable[[EvalResult], None] | None = None
    """Called with an arm's figures once its goals are played."""
    rollout: Callable[[RolloutProgress], None] | None = None
    """Called as episodes and turns are played."""


@dataclass(frozen=True)
class EvalReport:
    """What an evaluation measured: each arm's figures and the arms compared goal by goal."""

    arms: list[EvalResult]
    """One result per arm, in :attr:`EvalSettings.arms` order."""
    comparisons: list[ArmComparison]
    """Each later arm against the first (won, lost, exact McNemar p); empty for one arm."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (what ``skillrl eval --json`` prints)."""
        from dataclasses import asdict

        return {
            "arms": [r.to_dict() for r in self.arms],
            "comparisons": [asdict(c) for c in self.comparisons],
        }


def evaluate_model(settings: EvalSettings, *, watch: EvalWatch | None = None) -> EvalReport:
    """Evaluate a model in each skills arm on the same goals, then compare the arms.

    The bank is the workspace's (opened, and seeded when empty, unless every arm is ``off``);
    the placebo arm retrieves for training goals (:func:`skillrl.skill_arms.donor_tasks`).
    """
    from skillrl.policies import load_policy
    from skillrl.skill_arms import donor_tasks, retrieval_source
    from trainers.evaluate import compare_arms, evaluate
    from trainers.policy_rollouts import PolicyRollouts

    watch = watch or EvalWatch()
    arms, env_config = settings.arms, dict(settings.env_config)
    donors = donor_tasks(settings.env_id, env_config) if "placebo" in arms else None
    policy = load_policy(settings.policy)
    bank = open_bank(settings.workspace, settings.env_id) if arms != ("off",) else None
    results = []
    try:
        for arm in arms:
            runner = PolicyRollouts(
                policy,
                env_id=settings.env_id,
                bank=retrieval_source(arm, bank, donors),
                env_config=env_config,
                max_turns=settings.max_turns,
                max_new_tokens=settings.max_new_tokens,
                constrained=settings.constrained,
                prompt_config=settings.prompt,
                count_retrievals=False,
                # Only measured, never trained on: sampled (Pass@K) turns get the same query
                # repair as greedy ones.
                repair_queries=True,
                on_progress=watch.rollout,
            )
            if watch.arm_started is not None:
                watch.arm_started(arm)
            result = evaluate(runner, settings.config, arm)
            results.append(result)
            if watch.arm_ended is not None:
                watch.arm_ended(result)
    finally:
        if bank is not None:
            bank.close()
    return EvalReport(arms=results, comparisons=compare_arms(results))


def rollout_policy_for(settings: TrainSettings, policy: Any) -> Any:
    """Return the policy training rollouts play.

    The rollout server's (``--backend trl-vllm``), a copy of ``policy`` in ``rollout_dtype``
    that the run refreshes after every update, or ``policy`` itself (float32: the rollouts
    share the weights the update trains).
    """
    from skillrl.policies import load_policy

    if settings.server is not None:
        return load_policy(settings.server)
    if settings.cycle.rollout_dtype == "float32":
        return policy
    import torch

    from skillrl.policies.weight_sync import SyncedCopyPolicy

    return SyncedCopyPolicy.copy_of(policy, getattr(torch, settings.cycle.rollout_dtype))


def training_policy_config(
    model: str, workspace: str | Path | None, threads: int | None = None
) -> PolicyConfig:
    """Return the config of a policy that trains in-process (transformers, fp32 weights)."""
    from skillrl.policies import PolicyConfig
    from skillrl.workspace import resolve_workspace

    return PolicyConfig(
        backend="transformers",
        model=model,
        dtype="float32",
        workspace=resolve_workspace(workspace),
        threads=threads,
    )


def make_distiller() -> Any:
    """Return the distiller a training run uses between cycles."""
    from skillrl.distill import AnalyticDistiller

    return AnalyticDistiller()
