"""The cold-start phase: behaviour cloning, then DAgger rounds, resumable, in its own folder.

Round 0 gathers demonstrations (expert / bank / teacher, training goals only) and fine-tunes the
policy on them; each DAgger round r >= 1 rolls the current policy out on fresh training goals,
labels every state it visited with the expert's action, adds those examples to the dataset and
fine-tunes again on all of it (DAgger aggregates). Each round has two phases, ``data`` and
``train`` (:class:`ColdStartPhase`, driven by :func:`trainers.common.phased_run.drive`); a phase
writes its files first and ``state.json`` last, so a killed run resumes with ``resume=True`` without
redoing finished work: the dataset files are kept, finished rounds are
skipped, and a half-trained round continues from its last trainer checkpoint.

Layout of the run folder (``<workspace>/runs/<name>/sft/``)::

    config.json                 the ColdStartConfig and prompt budget it was started with
    state.json                  last completed (round, phase), per-round metrics
    data/round-<r>.jsonl        the examples gathered in round r
    dataset.jsonl               all rounds so far (what the last round trained on)
    trainer/round-<r>/          HF Trainer checkpoints while round r trains (removed after)
    checkpoints/round-<r>/      from_pretrained-loadable model + tokenizer after round r
    metrics.jsonl, tensorboard/ one row per round; per-step loss in TensorBoard
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from skillrl.policies.model_settings import ModelSettings
from skillrl_core.errors import CheckpointError, ConfigError, DataFileError
from skillrl_core.files import atomic_write_json, atomic_write_text, read_json_object
from skillrl_core.splits import TRAIN_SPLIT
from trainers.cold_start.cold_start_data import ExampleGatherer
from trainers.cold_start.round_metrics import DataFigures, RoundMetrics, TrainFigures
from trainers.cold_start.sft import RoundResult, train_round
from trainers.cold_start.sft_config import ColdStartConfig
from trainers.cold_start.sft_data import TurnExample, read_examples, write_examples
from trainers.common.checkpoint import save_checkpoint
from trainers.common.phased_run import Phase, PhaseSaved, RunEvents, drive
from trainers.common.run_state import (
    CONFIG_FILE,
    STATE_FILE,
    PhasedRunState,
    prepare_run_folder,
    read_run_state,
)
from trainers.common.settings_migration import changed_settings

if TYPE_CHECKING:
    from memory.bank import SkillBank
    from skillrl.policies.base import ChatPolicy
    from skillrl.policies.transformers_backend import TransformersPolicy
    from skillrl.prompts import PromptConfig

logger = logging.getLogger(__name__)


RESUMABLE_COLD_START = {"cold_start": ("dagger_rounds",)}
"""What a cold start's resume may change, by section of its ``config.json``: the number of
DAgger rounds (a finished run goes on with more)."""


class ColdStartPhase(Phase):
    """The phases of a cold-start round, in order."""

    DATA = "data"
    TRAIN = "train"


@dataclass
class ColdStartState(PhasedRunState):
    """Where a cold-start run stands; written after every completed phase."""

    stage_field: ClassVar[str] = "round"
    phases: ClassVar[type[Phase]] = ColdStartPhase

    round: int = 0
    """The round in progress (once ``done``: the next one more ``--dagger-rounds`` would run)."""


def checkpoint_path(root: Path, round_index: int) -> Path:
    """Return the folder of the model a cold-start run in ``root`` saved after a round."""
    return root / "checkpoints" / f"round-{round_index:04d}"


def finished_checkpoint(root: Path, rounds: int) -> Path | None:
    """Return the final model of a finished run of ``rounds`` rounds in ``root`` (else None)."""
    try:
        state = json.loads((root / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    final = checkpoint_path(root, rounds - 1)
    done = bool(state.get("done")) and state.get("round") == rounds
    return final if done and final.exists() else None


def cold_start_goal_order(env_id: str, env_config: dict[str, Any], seed: int) -> list[int]:
    """Return the training split's goal indices in a seeded order (rounds take disjoint slices)."""
    import envs

    # The adapter's split size, not the env's own goal list: every environment has one
    # (Sokoban's rooms are generated on first use, so counting them builds none).
    size = envs.adapter_for(env_id).split_size(TRAIN_SPLIT, env_config)
    if size < 1:
        raise ConfigError(f"environment {env_id!r} has no training goals in this configuration")
    order = list(range(size))
    random.Random(f"sft-goals-{seed}").shuffle(order)
    return order


def settings_of(
    config: ColdStartConfig,
    max_prompt_tokens: int,
    env_config: dict[str, Any] | None = None,
    **extra: Any,
) -> ModelSettings:
    """Return the :class:`ModelSettings` a cold start's models are played under.

    ``env_config`` is the environment the episodes ran in (its turn cap is the run's, not the
    model's); ``extra`` fills the descriptive fields (``recipe``, ``figures``).
    """
    return ModelSettings(
        env_id=config.env_id,
        skills=config.skills,
        max_prompt_tokens=max_prompt_tokens,
        constrained=config.constrained,
        env_options={k: v for k, v in (env_config or {}).items() if k != "max_turns"},
        **extra,
    )


class ColdStartRun:
    """One resumable cold-start run over an in-process policy (``.model``, ``.tokenizer``)."""

    def __init__(
        self,
        config: ColdStartConfig,
        *,
        policy: TransformersPolicy,
        run_dir: Path,
        prompt_config: PromptConfig | None = None,
        bank: SkillBank | None = None,
        teacher: ChatPolicy | None = None,
        env_config: dict[str, Any] | None = None,
        events: RunEvents | None = None,
        on_episode: Callable[[int, int], None] | None = None,
        on_step: Callable[[int, int], None] | None = None,
    ) -> None:
        from skillrl.prompts import PromptConfig

        if config.skills and bank is None:
            raise ConfigError("skills are on but no skill bank was given (use --no-skills)")
        if "bank" in config.sources and bank is None:
            raise ConfigError("source 'bank' needs a skill bank")
        if "teacher" in config.sources and teacher is None:
            raise ConfigError("source 'teacher' needs a teacher policy (--teacher-model)")
        self.config, self.policy, self.bank, self.teacher = config, policy, bank, teacher
        self.prompt_config = prompt_config or PromptConfig()
        self.env_config = {**(env_config or {}), "max_turns": config.max_turns}
        self.root = run_dir
        self.events = events or RunEvents()
        """Where the run reports its phases (:mod:`trainers.common.phased_run`'s typed events):
        :class:`PhaseSaved` after a round's examples are written (``data``) and after each
        trainer checkpoint (``train``)."""
        self.on_episode = on_episode
        """Called as ``on_episode(finished, total)`` while examples are gathered."""
        self.on_step = on_step
        """Called as ``on_step(done, total)`` after each optimizer step."""
        self.on_loss: Callable[[int, float], None] | None = None
        """Called as ``on_loss(step, loss)`` whenever the trainer logs its training loss (the
        mean over the steps since its last log, every ``logging_steps``)."""
        self._order: list[int] | None = None
        self._gatherer = ExampleGatherer(
            config,
            policy=policy,
            bank=bank,
            teacher=teacher,
            env_config=self.env_config,
            prompt_config=self.prompt_config,
            on_episode=on_episode,
        )

    # -- files -----------------------------------------------------------------------------
    @property
    def state_path(self) -> Path:
        """The commit point of every phase."""
        return self.root / STATE_FILE

    @property
    def dataset_path(self) -> Path:
        """All examples so far, as JSONL (``datasets.load_dataset("json", ...)`` reads it)."""
        return self.root / "dataset.jsonl"

    def round_data(self, round_index: int) -> Path:
        """Return the file of the examples gathered in one round."""
        return self.root / "data" / f"round-{round_index:04d}.jsonl"

    def checkpoint(self, round_index: int) -> Path:
        """Return the folder of the model after one round."""
        return checkpoint_path(self.root, round_index)

    @property
    def final_checkpoint(self) -> Path:
        """The model after the last round (what GRPO starts from)."""
        return self.checkpoint(self.config.rounds - 1)

    def exists(self) -> bool:
        """Whether a run was started in this folder."""
        return self.state_path.exists()

    def load_state(self) -> ColdStartState:
        """Read ``state.json`` (CheckpointError, naming the file, when missing or damaged)."""
        return read_run_state(self.state_path, ColdStartState, "cold-start run")

    def _save_state(self, state: ColdStartState) -> None:
        atomic_write_json(self.state_path, state.to_dict())

    # -- driving ---------------------------------------------------------------------------
    def run(self, *, resume: bool = False) -> ColdStartState:
        """Run (or continue) every round; returns the final state."""
        state = self._start(resume)
        runners = {ColdStartPhase.DATA: self._data, ColdStartPhase.TRAIN: self._train}
        drive(
            state,
            range(state.round, self.config.rounds),
            lambda round_index: list(ColdStartPhase),
            runners,
            commit=self._save_state,
            events=self.events,
        )
        state.done = True
        self._save_state(state)
        return state

    def _settings(self) -> dict[str, Any]:
        return {"cold_start": asdict(self.config), "prompt": asdict(self.prompt_config)}

    def _start(self, resume: bool) -> ColdStartState:
        settings = self._settings()
        state = prepare_run_folder(
            self.root,
            settings,
            resume=resume and self.exists(),  # resuming a folder that holds no run starts one
            what="cold-start run",
            state_type=ColdStartState,
            check_resume=lambda _state: self._check_resume(settings),
        )
        state.done = False
        trained = state.round - 1 if state.phase != "train" else state.round
        if trained >= 0 and self.checkpoint(trained).exists():
            self._load_weights(self.checkpoint(trained))
        return state

    def _check_resume(self, settings: dict[str, Any]) -> dict[str, Any]:
        """Refuse a resume that changes more than the DAgger rounds; return ``settings``."""
        try:
            saved = read_json_object(self.root / CONFIG_FILE)
        except DataFileError as error:  # missing or damaged: the run's settings are unknown
            raise CheckpointError(f"{error}; the cold-start run cannot be resumed") from error
        changed = changed_settings(saved, settings, ("cold_start", "prompt"), RESUMABLE_COLD_START)
        if changed:
            raise CheckpointError(
                f"--resume with different settings than {self.root / CONFIG_FILE} "
                f"({'; '.join(changed[:3])}): only --dagger-rounds may change when resuming"
            )
        return settings

    def _load_weights(self, path: Path) -> None:
        """Continue from the model a finished round saved (the in-process model is replaced)."""
        from transformers import AutoModelForCausalLM

        dtype = next(self.policy.model.parameters()).dtype
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype)
        self.policy.model = model.to(next(self.policy.model.parameters()).device).eval()
        logger.info("resumed cold start from %s", path)

    # -- phases ----------------------------------------------------------------------------
    def goals_of(self, round_index: int) -> list[int]:
        """Training goals played in a round (round 0: ``goals``; then ``dagger_goals`` each)."""
        if self._order is None:
            self._order = cold_start_goal_order(
                self.config.env_id, self.env_config, self.config.seed
            )
        c = self.config
        start = 0 if round_index == 0 else c.goals + (round_index - 1) * c.dagger_goals
        count = c.goals if round_index == 0 else c.dagger_goals
        return [self._order[(start + i) % len(self._order)] for i in range(count)]

    def _data(self, round_index: int, state: ColdStartState) -> None:
        started, cpu = time.perf_counter(), time.process_time()
        path = self.round_data(round_index)
        metrics = self._current(state, round_index)
        if path.exists():  # written before a kill: kept, not gathered again
            examples = read_examples(path)
        else:
            # The callback may be set after construction (the CLI's bars are): pass it on now.
            self._gatherer.on_episode = self.on_episode
            gathered = self._gatherer.gather(round_index, self.goals_of(round_index))
            examples = gathered.examples
            metrics = metrics.with_figures(sources=gathered.sources, dagger=gathered.dagger)
            write_examples(path, examples)
        self.events.emit(PhaseSaved(round_index, ColdStartPhase.DATA))
        everything: list[TurnExample] = []
        for r in range(round_index + 1):
            everything.extend(read_examples(self.round_data(r)))
        write_examples(self.dataset_path, everything)
        held = metrics.data  # a phase resumed after a kill adds to what it had spent
        data = DataFigures(
            examples=len(examples),
            dataset_examples=len(everything),
            seconds=(held.seconds if held else 0.0) + time.perf_counter() - started,
            cpu_seconds=(held.cpu_seconds if held else 0.0) + time.process_time() - cpu,
        )
        row = metrics.with_figures(data=data).to_row()
        state.current = {k: v for k, v in row.items() if k != "round"}

    def _train(self, round_index: int, state: ColdStartState) -> None:
        started, cpu = time.perf_counter(), time.process_time()
        examples = self.training_examples(round_index)
        if not examples and round_index == 0:
            raise ConfigError(
                "round 0 has no examples to train on (no successful demonstration on the chosen "
                "goals); use more --goals or another source"
            )
        if not examples:
            raise ConfigError(
                f"DAgger round {round_index} kept no example (the learner made no mistake on its "
                "goals); use more --dagger-goals or --dagger-keep all"
            )
        folder = self.root / "trainer" / f"round-{round_index:04d}"
        done = [RoundMetrics.from_row(row).train for row in state.history]
        offset = sum(train.global_step for train in done if train is not None)
        with _StepLog(self.root / "tensorboard", offset) as write_log:

            def on_log(step: int, logs: dict[str, float]) -> None:
                write_log(step, logs)
                if self.on_loss is not None and isinstance(logs.get("loss"), int | float):
                    self.on_loss(step, float(logs["loss"]))

            model, result = self._fit(round_index, examples, folder, on_log)
        self.policy.model = model
        path = save_checkpoint(model, self.policy.tokenizer, self.checkpoint(round_index))
        self.model_settings().save(path)
        shutil.rmtree(folder, ignore_errors=True)
        train = TrainFigures(
            global_step=result.global_step,
            loss=result.train_loss,
            examples=result.examples,
            target_tokens=result.target_tokens,
            seconds=time.perf_counter() - started,
            cpu_seconds=time.process_time() - cpu,
        )
        metrics = self._current(state, round_index).with_figures(train=train, checkpoint=str(path))
        row = metrics.to_row()
        state.history = [h for h in state.history if h["round"] != round_index] + [row]
        _write_metrics(self.root / "metrics.jsonl", state.history)

    @staticmethod
    def _current(state: ColdStartState, round_index: int) -> RoundMetrics:
        """Return what the round in progress measured so far (kept in ``state.current``)."""
        return RoundMetrics.from_row({**state.current, "round": round_index})

    def model_settings(self) -> ModelSettings:
        """Return the settings this run trains under (saved beside every checkpoint)."""
        return settings_of(self.config, self.prompt_config.max_prompt_tokens, self.env_config)

    def training_examples(self, round_index: int) -> list[TurnExample]:
        """Return what round ``round_index`` trains on (:attr:`ColdStartConfig.dagger_replay`).

        Round 0 and classic DAgger: the whole dataset so far. With a replay factor k, a DAgger
        round trains on its own examples plus ``k`` times as many drawn (seeded by the run's
        seed and the round) from earlier rounds.
        """
        replay = self.config.dagger_replay
        if round_index == 0 or replay is None:
            return read_examples(self.dataset_path)
        new = read_examples(self.round_data(round_index))
        earlier: list[TurnExample] = []
        for r in range(round_index):
            earlier.extend(read_examples(self.round_data(r)))
        count = min(len(earlier), round(replay * len(new)))
        drawn = random.Random(f"sft-replay-{self.config.seed}-{round_index}").sample(earlier, count)
        return new + drawn

    def _fit(
        self,
        round_index: int,
        examples: list[TurnExample],
        folder: Path,
        on_log: Callable[[int, dict[str, float]], None],
    ) -> tuple[Any, RoundResult]:
        return train_round(
            self.policy.model,
            self.policy.tokenizer,
            examples,
            self.config,
            folder,
            resume=True,  # a folder left by a killed attempt is continued, never restarted
            on_log=on_log,
            on_save=lambda step: self.events.emit(PhaseSaved(round_index, ColdStartPhase.TRAIN)),
            on_step=self.on_step,
        )


class _StepLog:
    """Per-step training logs as TensorBoard scalars (one writer per round, steps run on)."""

    def __init__(self, folder: Path, offset: int) -> None:
        self.folder, self.offset, self.writer = folder, offset, None

    def __enter__(self) -> Callable[[int, dict[str, float]], None]:
        return self.log

    def log(self, step: int, logs: dict[str, float]) -> None:
        if self.writer is None:
            from torch.utils.tensorboard import SummaryWriter

            # purge_step drops what a killed attempt logged past the step resumed from.
            self.writer = SummaryWriter(str(self.folder), purge_step=self.offset + step)
        for key, value in logs.items():
            self.writer.add_scalar(f"sft/{key}", value, self.offset + step)

    def __exit__(self, *exc: Any) -> None:
        if self.writer is not None:
            self.writer.close()


def _write_metrics(path: Path, history: list[dict[str, Any]]) -> None:
    lines = [json.dumps(row, sort_keys=True) for row in history]
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
