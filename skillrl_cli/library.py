"""The Python entry points under the commands: train a policy with its bank, evaluate, play.

``skillrl train`` builds a :class:`TrainSettings` from its options, wires its progress bars to
a :class:`TrainWatch` and the run's typed events, calls :func:`train` and prints the
:class:`TrainResult`; ``skillrl eval`` does the same with :class:`EvalSettings`,
:func:`evaluate_model` and :class:`EvalReport`. A script or a notebook calls them the same way,
without click or rich. Each does what its command does once the settings are checked:
:func:`train` loads the policy (and the rollout server's, or a bf16 copy), opens the
workspace's bank, builds the runners and the distiller, and runs (or resumes)
:class:`~trainers.cycle.cycle.TrainingRun`; :func:`evaluate_model` loads the model and plays the
same goals in each skills arm (:func:`trainers.evaluate.evaluate`), then compares the arms;
``skillrl run`` plays through :func:`play` (:class:`PlaySettings`, :class:`PlayWatch`,
:class:`PlayResult`), which builds the agent (the model, the scripted expert or a person) and
runs the runtime's ``RolloutEngine`` over the bank.

It lives in the CLI layer because it wires every layer below it (the runtime's policies and
bank access with the trainers); the runtime never imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from envs.registry import DEFAULT_ENV
from skillrl.prompts import PromptConfig
from skillrl_cli.bank_access import open_bank
from skillrl_core.episode_limits import MAX_NEW_TOKENS, MAX_TURNS
from skillrl_core.errors import BankError, ConfigError
from skillrl_core.goal_range import GoalRange
from skillrl_core.splits import TEST_SPLIT

if TYPE_CHECKING:
    from memory.bank import SkillBank
    from skillrl.agents.base import AgentDecision, AgentState
    from skillrl.agents.llm import LLMAgent
    from skillrl.policies import PolicyConfig, SamplingConfig
    from skillrl.rollout import EpisodeStart, RolloutStats, TurnEvent
    from skillrl_core.records import EpisodeRecord
    from trainers.common.phased_run import RunEvents
    from trainers.common.policy_rollouts import RolloutProgress
    from trainers.cycle.checkpoint_choice import RunChoice
    from trainers.cycle.config import CycleConfig
    from trainers.cycle.cycle_metrics import CycleMetrics
    from trainers.cycle.processes import Processes
    from trainers.cycle.run_files import RunFiles, RunState
    from trainers.evaluate import ArmComparison, EvalConfig, EvalResult
    from trainers.update.config import GRPOConfig


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

    ``events`` receives the run's typed phase events (:mod:`trainers.common.phased_run`), ``watch``
    its finer progress. Under a launcher (``processes``, default: this process's place) the
    main process opens the model and the bank first (it may download the model or seed the
    bank), the others after it. The policy and the bank are closed on the way out.
    """
    from skillrl.policies import load_policy
    from skillrl.rollout import RolloutStats
    from trainers.common.phased_run import PhaseEnded, RunEvents
    from trainers.common.policy_rollouts import PolicyRollouts
    from trainers.cycle.cycle import TrainingRun
    from trainers.cycle.processes import Processes
    from trainers.cycle.run_files import CyclePhase

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
            max_parallel=cycle.rollout_parallel,
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
    max_turns: int = MAX_TURNS
    """Turn limit per episode."""
    max_new_tokens: int = MAX_NEW_TOKENS
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
    from memory.placebo import PlaceboRetrieval
    from skillrl.policies import load_policy
    from skillrl.skill_arms import donor_tasks, retrieval_source
    from trainers.common.policy_rollouts import PolicyRollouts
    from trainers.evaluate import compare_arms, evaluate

    watch = watch or EvalWatch()
    arms, env_config = settings.arms, dict(settings.env_config)
    donors = donor_tasks(settings.env_id, env_config) if "placebo" in arms else None
    if donors is not None:
        PlaceboRetrieval.check(donors)  # before the model loads and any arm plays
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


def _greedy_sampling() -> SamplingConfig:
    from skillrl.policies import SamplingConfig

    return SamplingConfig(
        max_new_tokens=MAX_NEW_TOKENS, temperature=0.0, seed=0, stop=["</action>"]
    )


@dataclass(frozen=True)
class ModelPlay:
    """How the model plays: which policy, its prompts, its decoding and sampling."""

    policy: PolicyConfig
    """The policy to load (backend, model, server, threads, workspace)."""
    prompt: PromptConfig = field(default_factory=PromptConfig)
    """How each turn's prompt is built (its token budget)."""
    constrained: bool = True
    """Constrained decoding (clicks chosen among the admissible ones) or free."""
    sampling: SamplingConfig = field(default_factory=_greedy_sampling)
    """Temperature, seed and generation budget of each turn (default: greedy)."""


PLAYERS = ("model", "expert", "human")
"""Who may act in :func:`play`."""


@dataclass(frozen=True)
class PlaySettings:
    """What :func:`play` plays: the episodes, who acts, how the model plays, the bank's use."""

    env_id: str = DEFAULT_ENV
    """The environment."""
    env_config: dict[str, Any] = field(default_factory=dict)
    """The environment's settings (``--env-option``), the same for every episode."""
    split: str = TEST_SPLIT
    """The split the goals are drawn from."""
    goals: GoalRange | str = GoalRange(0, 0)
    """The goals played, one episode each: a range of the split's goal indices, or one goal's
    stable id (played ``episodes`` times, one seed each)."""
    episodes: int = 1
    """How many times a goal given by id is played (a range plays each of its goals once)."""
    seed: int = 0
    """Seed of the first episode (episode i uses ``seed + i``)."""
    player: Literal["model", "expert", "human"] = "model"
    """Who acts: the model, the environment's scripted expert, or a person
    (:attr:`PlayWatch.ask`)."""
    model: ModelPlay | None = None
    """How the model plays; needed when it does, unused otherwise."""
    skills: bool = True
    """Retrieve skills into every turn (the bank opens); the expert never reads them."""
    max_turns: int = MAX_TURNS
    """Turn limit of an episode."""
    parallel: int = 16
    """Episodes played at once."""
    workspace: Path | None = None
    """The workspace folder of the skill bank (None: ``$SKILLRL_WORKSPACE``, else
    ``./.skillrl``)."""
    record: bool = False
    """Save the episodes into the bank's trajectory store and count their retrievals (training
    goals only: a test-split episode changes nothing in the bank)."""
    seed_bank: bool = True
    """Seed an empty bank with the environment's starting skills."""

    def __post_init__(self) -> None:
        if self.player not in PLAYERS:
            raise ConfigError(f"player ({self.player!r}) must be one of {', '.join(PLAYERS)}")
        if self.player == "model" and self.model is None:
            raise ConfigError("player 'model' needs model=ModelPlay(...): which model plays")
        for name in ("episodes", "max_turns", "parallel"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} ({getattr(self, name)}) must be at least 1")
        if self.seed < 0:
            raise ConfigError(f"seed ({self.seed}) must be >= 0")
        if isinstance(self.goals, GoalRange) and self.episodes != 1:
            raise ConfigError(
                f"episodes ({self.episodes}) is for a goal given by id; a range ({self.goals}) "
                "plays each of its goals once"
            )

    @property
    def starts(self) -> list[EpisodeStart]:
        """The episodes to play, in order (goal, seed and environment settings of each)."""
        from skillrl.rollout import EpisodeStart

        if isinstance(self.goals, GoalRange):
            return [
                EpisodeStart(
                    self.env_id,
                    self.split,
                    goal_index=goal,
                    seed=self.seed + i,
                    env_config=self.env_config,
                )
                for i, goal in enumerate(self.goals.indices())
            ]
        return [
            EpisodeStart(
                self.env_id,
                self.split,
                seed=self.seed + i,
                env_config=self.env_config,
                goal_id=self.goals,
            )
            for i in range(self.episodes)
        ]

    @property
    def uses_skills(self) -> bool:
        """Whether skills are retrieved into the turns (never for the expert)."""
        return self.skills and self.player != "expert"


@dataclass(frozen=True)
class PlayWatch:
    """How a caller follows play, and how a person takes part in it; every callback optional."""

    loading_model: Callable[[str], AbstractContextManager[Callable[[str], None] | None]] | None = (
        None
    )
    """Entered around loading the model, called with its name (``PolicyConfig.model``); what
    it gives back, when not None, receives the backend's progress lines."""
    episode_started: Callable[[dict[str, Any]], None] | None = None
    """Called with an episode's reset info (its ``instruction``, ``goal_id``) before anyone
    acts in it."""
    deciding: Callable[[str, int, int], AbstractContextManager[object]] | None = None
    """Entered around every batched decision, called as ``(agent name, turn, episodes)`` (the
    turn counted from 1)."""
    turn: Callable[[TurnEvent], None] | None = None
    """Called after every turn of every episode."""
    review: Callable[[AgentState, AgentDecision], AgentDecision] | None = None
    """Called before each action is sent; returns the decision to play (``--step``)."""
    ask: Callable[[AgentState], str] | None = None
    """Asks a person for the action to play (needed when :attr:`PlaySettings.player` is
    ``human``)."""


@dataclass(frozen=True)
class PlayResult:
    """What :func:`play` played: every episode, in the order of the settings' goals."""

    episodes: list[EpisodeRecord]
    """One typed record per episode (its turns, success, score)."""
    stats: RolloutStats
    """Where the time went (model, environment, retrieval) and the tokens generated."""

    @property
    def successes(self) -> int:
        """Episodes that reached their goal."""
        return sum(r.success for r in self.episodes)

    @property
    def success_rate(self) -> float:
        """Share of the episodes that reached their goal."""
        return self.successes / len(self.episodes) if self.episodes else 0.0

    @property
    def mean_score(self) -> float:
        """Mean final score of the episodes."""
        return sum(r.score for r in self.episodes) / len(self.episodes) if self.episodes else 0.0


def play(
    settings: PlaySettings, *, watch: PlayWatch | None = None, bank: SkillBank | None = None
) -> PlayResult:
    """Play every episode of ``settings`` and return their records.

    The bank is opened (and seeded when empty, unless ``settings.seed_bank`` is off) when the
    turns retrieve skills or the episodes are recorded; a ``bank`` given is played instead and
    left open. A read-only bank is played as it is, but cannot record (:class:`BankError`).
    """
    from skillrl.rollout import RolloutConfig, RolloutEngine

    watch = watch or PlayWatch()
    if settings.player == "human" and watch.ask is None:
        raise ConfigError("player 'human' needs PlayWatch(ask=...): where the actions come from")
    needs_bank = settings.uses_skills or settings.record
    opened = None
    if bank is None and needs_bank:
        bank = opened = open_bank(settings.workspace, settings.env_id, seed=settings.seed_bank)
    try:
        if bank is not None and bank.read_only and settings.record:
            raise BankError(
                f"the skill bank in {bank.config.workspace} is read-only, so the episodes could "
                "not be saved: add --no-record to play with its skills without saving anything"
            )
        agent = _Watched(_agent(settings, watch, settings.uses_skills and bank is not None), watch)
        engine = RolloutEngine(
            agent,
            bank=bank,
            config=RolloutConfig(
                max_turns=settings.max_turns,
                max_parallel=settings.parallel,
                record=settings.record and bank is not None,
                # Unrecorded play leaves the bank as it was; the engine counts training goals only.
                count_retrievals=settings.record,
            ),
            on_turn=watch.turn,
            review=watch.review,
        )
        episodes = engine.run(settings.starts)
    finally:
        if opened is not None:
            opened.close()
    return PlayResult(episodes=episodes, stats=engine.stats)


def _agent(settings: PlaySettings, watch: PlayWatch, uses_skills: bool) -> Any:
    """Build the agent ``settings.player`` names: the scripted expert, a person, or the model."""
    if settings.player == "expert":
        import envs
        from skillrl.agents.expert import ExpertAgent

        if envs.adapter_for(settings.env_id).make_expert(settings.max_turns) is None:
            raise ConfigError(f"environment {settings.env_id!r} has no scripted expert")
        return ExpertAgent(max_turns=settings.max_turns)
    if settings.player == "human":
        from skillrl.agents.human import HumanAgent

        assert watch.ask is not None  # play() refuses a person without it
        return HumanAgent(watch.ask, uses_skills=uses_skills)
    assert settings.model is not None  # PlaySettings refuses the model without it
    return load_model_agent(settings.model, uses_skills=uses_skills, watch=watch)


def load_model_agent(
    model: ModelPlay, *, uses_skills: bool = True, watch: PlayWatch | None = None
) -> LLMAgent:
    """Load the policy ``model`` names (under ``watch.loading_model``) as a playing agent."""
    from contextlib import nullcontext

    from skillrl.agents.llm import LLMAgent, LLMAgentConfig
    from skillrl.policies import load_policy

    loading = (watch or PlayWatch()).loading_model or (lambda _name: nullcontext(None))
    with loading(model.policy.model) as progress:
        policy = load_policy(model.policy, progress=progress)
    return LLMAgent(
        policy,
        model.prompt,
        constrained=model.constrained,
        config=LLMAgentConfig(sampling=model.sampling),
        uses_skills=uses_skills,
    )


class _Watched:
    """An agent whose episode starts and decisions a :class:`PlayWatch` follows."""

    def __init__(self, agent: Any, watch: PlayWatch) -> None:
        self.agent, self.watch = agent, watch
        self.name = agent.name
        self.uses_skills = agent.uses_skills

    def begin_episode(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        # Said when the episode starts, before anyone (model or person) acts on it.
        if self.watch.episode_started is not None:
            self.watch.episode_started(reset_info)
        self.agent.begin_episode(episode_id, reset_info)

    def end_episode(self, episode_id: str) -> None:
        self.agent.end_episode(episode_id)

    def act(self, states: list[Any]) -> list[Any]:
        if self.watch.deciding is None or not states:
            return self.agent.act(states)
        with self.watch.deciding(self.name, states[0].turn + 1, len(states)):
            return self.agent.act(states)


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
