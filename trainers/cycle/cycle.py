"""The recursive improvement cycle behind ``skillrl train``: weights and bank improve together.

Cycle 0 evaluates the starting point. Every later cycle runs, in order (``run_files.CyclePhase``,
driven by :func:`trainers.common.phased_run.drive`):

1. ``rollout``: G episodes per training goal (same goal and seed, sampled at the update's
   ``GRPOConfig.temperature``, skills retrieved every turn); zero-signal groups dropped and
   topped up (``trainers.cycle.sampling``); every episode goes to the bank's trajectory store;
2. ``distill``: pending training episodes become skills and notes; upkeep retires weak entries;
3. ``update``: turn rewards -> advantages -> one GRPO train step; trainer state saved; when the
   runner's policy rolls out in another process (``trl-vllm``), the new weights are pushed to it;
4. ``eval``: the fixed evaluation goals (the same every cycle), greedy by default; every
   ``CycleConfig.eval_every``-th cycle and the last;
5. ``evolve``: weak categories of the validation episodes get new entries;
6. ``save``: bank snapshot, model checkpoint (a LoRA run's: its adapter over the starting
   model), metrics (JSONL and the ``report_to`` tracker).

When the evaluation goals are not test goals (``--eval-split eval``) the run chooses its best
evaluated cycle on them (:mod:`trainers.cycle.checkpoint_choice`, ``best.json``), keeps that cycle's
trainable weights, may stop once ``--patience`` evaluations in a row have not beaten it, and ends
with the chosen weights in the model: with ``--test-goals`` it then plays the test goals with
them and pairs the result with cycle 0's play of the same goals, goal by goal.

Resumability: a phase writes its files first and ``state.json`` last; on ``--resume`` completed
phases are skipped and a half-done phase reuses what it already wrote (rollout episodes are kept
in ``cycles/<c>/rollout.json`` and stored idempotently with ``bank.trajectories.save_episodes``;
an update whose trainer state is on disk is not applied twice), so nothing is lost or duplicated.
Training rollouts hold their retrieval events back (``RolloutEngine(held_retrievals=...)``) and
record them with ``bank.record`` when the rollout phase commits, so a rollout killed half-way
leaves no usage counts behind; and
``--resume`` first deletes the temp files a killed write left (a half-saved checkpoint).

Under ``accelerate launch`` / ``torchrun`` (``trainers.cycle.processes``) every process runs this
loop in step: each rolls out its share of a round's goals and the episodes are gathered to all, so
every process takes the same dynamic-sampling decisions and trains on the same episodes
(data-parallel, its share of each optimizer step). The main process alone writes: the run
folder, the bank (episodes, retrieval counts, distillation, evolution, snapshots), evaluation
and checkpoints; every phase ends at a barrier, so what it wrote is on disk before any process
reads it (the others read ``rollout.json`` and the trainer state from the run folder, and the
bank re-reads its index when another process changed it, ``memory.store``).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.placebo import PlaceboRetrieval
from skillrl.sensitivity import SensitivityProbe
from skillrl.skill_arms import donor_tasks
from skillrl_core.errors import CheckpointError
from skillrl_core.records import EpisodeRecord
from skillrl_core.splits import TEST_SPLIT
from trainers.common.checkpoint import (
    load_trainable_weights,
    load_trainer_state,
    read_trainer_meta,
    save_checkpoint,
    save_trainable_weights,
    save_trainer_state,
)
from trainers.common.episode_metrics import summarise
from trainers.common.phased_run import (
    HeldOutPlayStarted,
    PhaseSaved,
    RunEvents,
    StageStarted,
    drive,
)
from trainers.common.policy_rollouts import PolicyRollouts
from trainers.common.run_state import prepare_run_folder
from trainers.common.seeding import seed_everything
from trainers.cycle.checkpoint_choice import (
    PairedTest,
    RunChoice,
    choose_cycle,
    evaluations_since_best,
)
from trainers.cycle.config import CycleConfig
from trainers.cycle.cycle_metrics import (
    BankChanges,
    BankWorth,
    CycleMetrics,
    GroupCounts,
    RolloutCost,
    SkillSensitivity,
    TrainingRollouts,
    UpdateFigures,
)
from trainers.cycle.cycle_rollout import collect_rollout, training_goal_order
from trainers.cycle.processes import Processes
from trainers.cycle.rewards import TurnRewardFn, compute_turn_rewards, default_reward_functions
from trainers.cycle.run_files import (
    CyclePhase,
    RunFiles,
    RunState,
    cycle_phases,
    plot_learning_curve,
)
from trainers.cycle.run_settings import check_resume_settings, check_saved_cycle, run_settings
from trainers.cycle.trackers import open_tracker
from trainers.update.advantages import AdvantageEstimator, TurnAdvantages
from trainers.update.batching import turn_left_out
from trainers.update.config import GRPOConfig
from trainers.update.grpo import GRPOTrainer
from trainers.update.update_record import UpdateRecord, update_record

if TYPE_CHECKING:
    from memory.bank import SkillBank
    from skillrl.agents.llm import LLMAgent
    from skillrl.distill.base import Distiller
    from skillrl.policies.model_settings import ModelSettings
    from skillrl.policies.transformers_backend import TransformersPolicy

logger = logging.getLogger(__name__)

TEST_EPISODES = "test"
"""Name of the test goals' episode files (``cycles/<c>/test.json``): cycle 0's and the chosen
cycle's, with ``--test-goals``."""
STARTING_BANK_EPISODES = "eval-starting-bank"
"""Name of the evaluation replayed with the cycle-0 bank (``compare_starting_bank``)."""


def snapshot_name(run_name: str, cycle: int) -> str:
    """Return the name of the bank snapshot a run saves at the end of ``cycle``."""
    return f"{run_name}-cycle-{cycle:04d}"


class TrainingRun:
    """One resumable ``skillrl train`` run over a policy, a runner and (optionally) a bank.

    ``options`` are the launching command's resolved options (``skillrl train``'s, option name
    -> plain value); they are saved with the configs in the run's ``config.json``
    (:mod:`trainers.cycle.run_settings`), its one settings file.
    """

    def __init__(
        self,
        config: CycleConfig,
        grpo: GRPOConfig,
        *,
        policy: TransformersPolicy,
        runner: PolicyRollouts,
        run_dir: Path,
        eval_runner: PolicyRollouts | None = None,
        bank: SkillBank | None = None,
        distiller: Distiller | None = None,
        reward_functions: Sequence[TurnRewardFn] | None = None,
        events: RunEvents | None = None,
        processes: Processes | None = None,
        options: Mapping[str, Any] | None = None,
        base_model: str | None = None,
        advantage_estimator: AdvantageEstimator | None = None,
    ) -> None:
        self.config, self.grpo = config, grpo
        self.advantage_estimator = advantage_estimator or grpo.advantage_estimator()
        """How the update's turns get their advantages (default: ``grpo.estimator``'s)."""
        self.options = options
        self.base_model = base_model
        """The model the run started from, as loaded (``embedded``, a folder, an adapter): a
        LoRA run saves each checkpoint as its adapter over it, unless
        :attr:`CycleConfig.merged_checkpoints`. None: every checkpoint is a whole model."""
        # Before the trainer's Accelerator: this starts the process group with our timeout.
        self.processes = processes or Processes.current()
        self.policy, self.runner, self.bank, self.distiller = policy, runner, bank, distiller
        self.eval_runner = eval_runner or runner
        """Plays evaluation and validation (default: ``runner``; the CLI passes one over the
        float32 weights when training rollouts play a bf16 copy)."""
        self._placebo: PlaceboRetrieval | None = None
        self._no_placebo = False
        """Every training goal reads the same task: the sensitivity probe has nothing to swap."""
        self._starting_bank: SkillBank | None = None
        """The cycle-0 bank's copy (``compare_starting_bank``), opened on first use."""
        self.files = RunFiles(run_dir)
        self.rewards = list(
            reward_functions
            or default_reward_functions(
                config.invalid_action_penalty, config.turn_cost, reward=config.reward
            )
        )
        self.events = events or RunEvents()
        """Where the run reports its phases (:mod:`trainers.common.phased_run`'s typed events);
        ``rollout`` and ``update`` emit :class:`PhaseSaved` once their files are written."""
        self.events.on(StageStarted, self._start_clock)
        self.state = RunState()
        """Where the run stands, in memory (``state.json`` is its committed copy)."""
        self.metrics: CycleMetrics | None = None
        """The last saved cycle's metrics (set when ``PhaseEnded`` of ``save`` fires); its
        :meth:`~CycleMetrics.to_row` is the row ``metrics.jsonl`` got."""
        pad = policy.tokenizer.pad_token_id
        # Before the trainer: a LoRA adapter's initial weights come from torch's generator.
        seed_everything(config.seed)
        self.trainer = GRPOTrainer(policy.model, grpo, pad_token_id=pad, seed=config.seed)
        self.goal_order = training_goal_order(config, runner.split_size(config.train_split))
        # Only the main process saves, so only it reports (a hosted run starts on first use).
        self.tracker = open_tracker(config.report_to, run_dir, run_settings(config, grpo, options))

    # -- driving ---------------------------------------------------------------------------
    def run(self, *, resume: bool = False) -> RunState:
        """Run (or continue) every cycle; returns the final state."""
        state = self.state = self._start(resume)
        # A rollout server (trl-vllm) starts from the trainer's weights, resumed ones included;
        # syncing before the first rollout also surfaces a sync setup problem early.
        if self.processes.is_main:
            self._sync_rollout_weights()
        try:
            self._cycles(state)
        finally:
            self.tracker.close()
            if self._starting_bank is not None:
                self._starting_bank.close()
                self._starting_bank = None
        if self.config.chooses_checkpoint:
            self._leave_chosen(state)
        state.done = True
        self._save_state(state)
        if self.processes.is_main:
            plot_learning_curve(state.history, self.files.curve_path, self.files.root.name)
        return state

    def _cycles(self, state: RunState) -> None:
        """Run every cycle from ``state.cycle`` on, skipping the phases already completed."""
        runners = {
            CyclePhase.ROLLOUT: self._rollout,
            CyclePhase.DISTILL: self._distill,
            CyclePhase.UPDATE: self._update,
            CyclePhase.EVAL: self._eval,
            CyclePhase.EVOLVE: self._evolve,
            CyclePhase.SAVE: self._save,
        }
        # Lazily: a cycle whose save phase stopped the run (--patience) ends the range.
        cycles = itertools.takewhile(
            lambda _cycle: state.stopped_early_after is None,
            range(state.cycle, self.config.cycles + 1),
        )
        drive(
            state,
            cycles,
            lambda cycle: cycle_phases(self.config, cycle),
            runners,
            commit=self._save_state,
            events=self.events,
            barrier=self.processes.wait,  # what a phase wrote is on disk for every process
        )

    def _start_clock(self, started: StageStarted) -> None:
        self._cycle_started = time.perf_counter()

    def _save_state(self, state: RunState) -> None:
        """Commit ``state`` (the main process's; the others keep theirs in step, unsaved)."""
        if self.processes.is_main:
            self.files.save_state(state)

    def _start(self, resume: bool) -> RunState:
        # The main process checks and prepares the folder; a refusal stops every process.
        state = self.processes.from_main(lambda: self._prepare_folder(resume))
        if resume and read_trainer_meta(self.files.trainer_state) is not None:
            # Every process loads it: the optimizer state is per process, like the weights.
            load_trainer_state(
                self.trainer.unwrapped_model, self.trainer.optimizer, self.files.trainer_state
            )
            logger.info("resumed trainer state from %s", self.files.trainer_state)
        return state

    def _prepare_folder(self, resume: bool) -> RunState:
        return prepare_run_folder(
            self.files.root,
            run_settings(self.config, self.grpo, self.options),
            resume=resume,
            what="run",
            state_type=RunState,
            check_resume=self._resumed_settings,
        )

    def _resumed_settings(self, state: RunState) -> dict[str, Any]:
        """Refuse a resume that changes what the run trains; return the settings it saves again."""
        saved = check_resume_settings(self.files, self.config, self.grpo, self.options)
        check_saved_cycle(self.files, state)
        # A resume without launch options (a library caller) keeps the ones the run saved.
        options = self.options if self.options is not None else saved.get("options")
        return run_settings(self.config, self.grpo, options)

    # -- phases ----------------------------------------------------------------------------
    def _rollout(self, cycle: int, state: RunState) -> None:
        phase = self.files.load_rollout(cycle)
        if phase is None:
            phase = collect_rollout(
                self.runner,
                self.config,
                self.processes,
                self.rewards,
                self.goal_order,
                cycle=cycle,
                cursor=state.goal_cursor,
                temperature=self.grpo.temperature,
            )
            if self.processes.is_main:
                self.files.save_rollout(cycle, phase)
        self.events.emit(PhaseSaved(cycle, CyclePhase.ROLLOUT))
        if self.bank is not None and self.processes.is_main:
            # Retrievals were held back while rolling out (a killed attempt counts nothing);
            # they reach the bank now, once, marked in rollout.json so a resume skips them.
            if not phase.retrievals_recorded:
                self.bank.record(phase.retrievals)
                phase.retrievals_recorded = True
                self.files.save_rollout(cycle, phase)
            # Idempotent by episode id. An episode that ended on an error is left out, as the
            # rollout engine leaves it out elsewhere: its turns did not all happen.
            self.bank.trajectories.save_episodes([e for e in phase.episodes if not e.error])
        state.goal_cursor = phase.cursor_end
        self._measured(
            state,
            cycle,
            train=TrainingRollouts.of(summarise(phase.episodes)),
            groups=GroupCounts(len(phase.kept_groups), phase.dropped_groups, phase.failed_groups),
            rollout=RolloutCost(phase.seconds, phase.model_seconds, phase.forwarded_tokens),
        )

    def _distill(self, cycle: int, state: RunState) -> None:
        if self.bank is None or self.distiller is None or not self.config.distill:
            return
        if not self.processes.is_main:
            return
        from skillrl.distill import PipelineConfig, distill_pending, upkeep

        pipeline = PipelineConfig(env=self.config.env_id, splits=(self.config.train_split,))
        report = distill_pending(self.bank, self.distiller, pipeline)
        retired = len(upkeep(self.bank).retired) if self.config.upkeep else None
        changes = BankChanges(len(report.added), len(report.merged), retired)
        self._measured(state, cycle, bank=changes)

    def _update(self, cycle: int, state: RunState) -> None:
        meta = read_trainer_meta(self.files.trainer_state)
        if meta is not None and meta.get("cycle") == cycle:
            # Applied before an interruption: not twice.
            self._measured(state, cycle, update=UpdateFigures.from_row(meta["metrics"]))
            return
        phase = self.files.load_rollout(cycle)
        if phase is None:
            raise CheckpointError(f"cycle {cycle}: rollout episodes are missing; cannot update")
        episodes = phase.kept_episodes()
        rewards = compute_turn_rewards(episodes, self.rewards)
        advantages = self.advantage_estimator.estimate(episodes, rewards)
        if self.processes.is_main:  # what the update uses, for a reader (skillrl view)
            self.files.save_update_record(cycle, self._update_record(episodes, rewards, advantages))
        prefix_cache = getattr(self.policy, "prefix_cache", None)
        if prefix_cache is not None:
            # Stale once the weights change, and up to its budget of memory during the update.
            prefix_cache.clear()
        # The order the update cuts its samples in depends on the cycle alone, not on how many
        # updates this process ran before it: a resumed run shuffles as an unbroken one does.
        # The global generators (dropout) are seeded the same way: an update draws the same
        # masks whether the run was resumed or not, whatever the rollouts drew before it.
        cycle_seed = self.config.seed * 1_000_003 + cycle
        self.trainer.generator.manual_seed(cycle_seed)
        seed_everything(cycle_seed)
        step = self.trainer.train_step(episodes, advantages.advantages)
        self.trainer.model.eval()
        if not self.processes.is_main:
            return  # every process trained; the main one saves the (identical) state
        shared = sum(n for size, n in advantages.step_group_sizes.items() if size > 1)
        figures = UpdateFigures(step, shared)
        save_trainer_state(
            self.trainer.unwrapped_model,
            self.trainer.optimizer,
            self.files.trainer_state,
            meta={"cycle": cycle, "metrics": figures.to_row()},
        )
        self.events.emit(PhaseSaved(cycle, CyclePhase.UPDATE))
        seconds = self._sync_rollout_weights()  # after the save: a failed sync loses no update
        figures = dataclasses.replace(figures, sync_seconds=seconds)
        self._measured(state, cycle, update=figures)

    def _update_record(
        self,
        episodes: list[EpisodeRecord],
        rewards: list[list[float]],
        advantages: TurnAdvantages,
    ) -> UpdateRecord:
        keep_zero = self.grpo.trains_zero_advantage_turns
        left_out = [
            [
                turn_left_out(t, a, keep_zero_advantage=keep_zero)
                for t, a in zip(e.turns, row, strict=True)
            ]
            for e, row in zip(episodes, advantages.advantages, strict=True)
        ]
        return update_record(
            episodes, rewards, advantages, left_out, step_weight=advantages.step_weight
        )

    def _sync_rollout_weights(self) -> float | None:
        """Push the trained weights to the runner's policy when it rolls out elsewhere.

        A policy that serves rollouts from another process (``TRLVLLMServerPolicy``) or from
        its own copy of the weights (``SyncedCopyPolicy``, bf16 rollouts) has
        ``sync_weights(model) -> seconds``; the in-process policy shares the trained model and
        needs nothing. Returns the seconds the sync took, or None when there was nothing to do.
        """
        sync = getattr(self.runner.policy, "sync_weights", None)
        if sync is None:
            return None
        return float(sync(self.trainer.unwrapped_model))

    def _eval(self, cycle: int, state: RunState) -> None:
        if not self.processes.is_main:
            return
        played = self._played(
            cycle,
            "eval",
            self.config.eval_split,
            self.config.eval_goals,
            probe=self._sensitivity_probe(),
        )
        sensitivity = played.get("sensitivity")
        figures: dict[str, Any] = (
            {"sensitivity": SkillSensitivity.of(sensitivity)} if sensitivity else {}
        )
        bank = self.bank
        if self.config.compare_starting_bank and cycle > 0 and bank is not None:
            starting = self._played(
                cycle,
                STARTING_BANK_EPISODES,
                self.config.eval_split,
                self.config.eval_goals,
                runner=lambda: self._starting_bank_runner(bank),
            )["episodes"]
            figures["bank_worth"] = BankWorth.of(starting, played["episodes"])
        self._measured(state, cycle, eval=summarise(played["episodes"]), **figures)
        if cycle == 0 and self.config.test_goals:
            # The starting model on the test goals: what the chosen cycle is paired with at the
            # end. Played here, once, so a run never plays test goals in between.
            self._episodes_of(0, TEST_EPISODES, TEST_SPLIT, self.config.test_goals)

    def _sensitivity_probe(self) -> Callable[[LLMAgent], SensitivityProbe] | None:
        """Return how to wrap the evaluation's agent in a sensitivity probe (None: no probe)."""
        runner = self.eval_runner
        if not self.config.sensitivity or self.bank is None or runner.bank is None:
            return None
        if self._placebo is None and not self._no_placebo:
            donors = donor_tasks(runner.env_id, dict(runner.env_config))
            if not PlaceboRetrieval.possible(donors):
                # An optional figure: the run goes on without it rather than stop at cycle 0.
                logger.warning(
                    "no skill sensitivity: every training goal of %s reads the same task (%r), "
                    "so no other goal's entries exist to swap in",
                    runner.env_id,
                    donors[0].instruction,
                )
                self._no_placebo = True
            else:
                self._placebo = PlaceboRetrieval(self.bank, donors)
        placebo = self._placebo
        if placebo is None:
            return None
        return lambda agent: SensitivityProbe(agent, placebo)

    def _episodes_of(
        self, cycle: int, name: str, split: str, goals: int, first: int = 0
    ) -> list[EpisodeRecord]:
        return self._played(cycle, name, split, goals, first=first)["episodes"]

    def _played(
        self,
        cycle: int,
        name: str,
        split: str,
        goals: int,
        probe: Callable[[LLMAgent], SensitivityProbe] | None = None,
        first: int = 0,
        runner: Callable[[], PolicyRollouts] | None = None,
    ) -> dict[str, Any]:
        """Play (or read back, on resume) ``goals`` goals of ``split``, from goal ``first`` on.

        Returns the episodes as records, with the sensitivity figures when ``probe`` watched them.
        ``runner`` makes the runner that plays them (default: the evaluation runner); it is
        called only when the episodes are not on disk yet.
        """
        data = self.files.load_episodes(cycle, name)
        if data is not None:
            return data
        runner = runner() if runner is not None else self.eval_runner
        indices = range(first, first + goals)
        starts = [runner.start(split, i, seed=self.config.seed + i) for i in indices]
        probes: list[SensitivityProbe] = []

        def wrap(agent: LLMAgent) -> SensitivityProbe:
            probes.append(probe(agent))
            return probes[-1]

        # Evaluation and validation only measure: they leave the entries' usage counters alone.
        episodes = runner.run(
            starts,
            temperature=self.config.eval_temperature,
            sampling_seed=self.config.seed,
            count_retrievals=False,
            wrap=wrap if probe is not None else None,
        )
        payload: dict[str, Any] = {"episodes": [e.to_dict() for e in episodes]}
        if probes:
            # What a cycle records: no reference watches its probe, so no win/loss counts.
            payload["sensitivity"] = dataclasses.asdict(
                SkillSensitivity.of(vars(probes[0].report.overall))
            )
        self.files.save_episodes(cycle, name, payload)
        return {**payload, "episodes": episodes}

    def _starting_bank_runner(self, bank: SkillBank) -> PolicyRollouts:
        """Return the evaluation runner over a copy of the bank as it was at cycle 0.

        The copy (``starting_bank/`` in the run folder, SQLite and an embedded index whatever
        the live bank's backend) is restored from cycle 0's snapshot once, in a temporary
        folder renamed into place, so a killed restore leaves nothing half written.
        """
        if self._starting_bank is None:
            from memory import SkillBank

            folder = self.files.starting_bank
            config = dataclasses.replace(
                bank.config, workspace=folder, database_url=None, chroma_url=None
            )
            embedder = bank.store.embedder
            if not folder.exists():
                building = folder.with_name(folder.name + ".tmp")
                shutil.rmtree(building, ignore_errors=True)
                snapshot = snapshot_name(self.files.root.name, 0)
                with SkillBank.open(
                    dataclasses.replace(config, workspace=building), embedder=embedder
                ) as copy:
                    restored = bank.snapshots.restore_into(snapshot, copy.store)
                building.rename(folder)
                logger.info("the cycle-0 bank (%d entries) copied to %s", restored, folder)
            self._starting_bank = SkillBank.open(config, embedder=embedder)
        return dataclasses.replace(self.eval_runner, bank=self._starting_bank)

    def _evolve(self, cycle: int, state: RunState) -> None:
        if self.bank is None or self.distiller is None or not self.config.evolve:
            return
        if not self.processes.is_main:
            return
        from skillrl.distill import evolve_from_validation

        goals = self.config.evolve_goals
        if goals is None:
            logger.info("no validation goals and the evaluation goals are test goals: no evolve")
            self._measured(state, cycle, bank=BankChanges(evolved_entries=0))
            return
        validation = self._episodes_of(cycle, goals.name, goals.split, goals.goals, goals.first)
        report = evolve_from_validation(self.bank, self.distiller, validation)
        evolved = sum(len(r.added) + len(r.refined) for r in report.evolved)
        self._measured(state, cycle, bank=BankChanges(evolved_entries=evolved))

    def _save(self, cycle: int, state: RunState) -> None:
        if not self.processes.is_main:
            return
        # Wall time of the cycle in this process (a resumed cycle counts its resumed part).
        seconds = time.perf_counter() - self._cycle_started
        metrics = self._current(state, cycle).with_figures(seconds=seconds)
        if self.bank is not None:
            metrics = metrics.with_figures(bank=self._snapshot(cycle))
        last = cycle == self.config.cycles
        if cycle > 0 and (last or cycle % self.config.checkpoint_every == 0):
            adapter = self.grpo.use_peft and not self.config.merged_checkpoints
            path = save_checkpoint(
                self.trainer.unwrapped_model,
                self.policy.tokenizer,
                self.files.checkpoint(cycle),
                settings=self.model_settings(metrics),
                adapter_over=self.base_model if adapter else None,
            )
            metrics = metrics.with_figures(checkpoint=str(path))
        self.metrics = metrics
        state.tested = False  # a new cycle may change the choice the test figures are about
        row = metrics.to_row()
        state.history = [h for h in state.history if h["cycle"] != cycle] + [row]
        self.files.write_metrics(state.history)
        self.tracker.log(row)
        if self.config.chooses_checkpoint and metrics.eval is not None:
            self._choose(cycle, state)

    def _choose(self, cycle: int, state: RunState) -> None:
        """Keep the best evaluated cycle so far (``best.json``, its weights); stop on patience.

        Redone whole when a killed save phase is resumed: every write here is idempotent.
        """
        best = choose_cycle(state.history)
        if best is None:
            return
        if best.cycle == cycle:
            save_trainable_weights(self.trainer.unwrapped_model, self.files.best_weights)
        behind = evaluations_since_best(state.history)
        patience = self.config.patience
        if patience and behind >= patience and cycle < self.config.cycles:
            state.stopped_early_after = cycle
            logger.warning(
                "stopping early after cycle %d: %d evaluation(s) in a row below cycle %d's %d/%d "
                "on the %s goals (--patience %d); the run leaves cycle %d",
                cycle,
                behind,
                best.cycle,
                best.successes,
                best.episodes,
                self.config.eval_split,
                patience,
                best.cycle,
            )
        self.files.save_choice(self._choice(best, state))

    def _choice(self, best: Any, state: RunState, test: PairedTest | None = None) -> RunChoice:
        checkpoint = self.files.checkpoint(best.cycle)
        return RunChoice(
            cycle=best.cycle,
            checkpoint=str(checkpoint.relative_to(self.files.root)) if best.cycle else None,
            evaluation=best,
            evaluation_split=self.config.eval_split,
            stopped_early_after=state.stopped_early_after,
            test=test,
        )

    def _leave_chosen(self, state: RunState) -> None:
        """Put the chosen cycle's weights in the model; with test goals, play and pair them.

        Every process loads the weights (they stay in step); the main one plays and writes.
        """
        best = choose_cycle(state.history)
        if best is None:
            return
        if self.files.best_weights.exists():
            load_trainable_weights(self.trainer.unwrapped_model, self.files.best_weights)
            prefix_cache = getattr(self.policy, "prefix_cache", None)
            if prefix_cache is not None:
                prefix_cache.clear()  # computed with the last cycle's weights
            if self.processes.is_main:
                self._sync_rollout_weights()
        if not self.config.test_goals or state.tested or not self.processes.is_main:
            self.processes.wait()
            return
        goals = self.config.test_goals
        if best.cycle > 0:  # cycle 0's test episodes are read back from its evaluation
            self.events.emit(HeldOutPlayStarted(best.cycle, goals))
        start = self._episodes_of(0, TEST_EPISODES, TEST_SPLIT, goals)
        chosen = self._episodes_of(best.cycle, TEST_EPISODES, TEST_SPLIT, goals)
        test = PairedTest.of(start, chosen)
        self.files.save_choice(self._choice(best, state, test))
        if best.cycle > 0:  # its skillrl.json now records test figures, as a test-evaluated run's
            self._record_test_figures(best.cycle, chosen)
        logger.info(
            "cycle %d (chosen on %d %s goals) solved %d/%d test goals, the start %d "
            "(%d won, %d lost, p = %.3g)",
            best.cycle,
            best.episodes,
            self.config.eval_split,
            test.chosen_successes,
            test.goals,
            test.start_successes,
            test.won,
            test.lost,
            test.p_value,
        )
        state.tested = True
        self._save_state(state)
        self.processes.wait()

    def _record_test_figures(self, cycle: int, episodes: list[EpisodeRecord]) -> None:
        """Add test figures to a checkpoint's ``skillrl.json`` (``--model auto`` weighs them)."""
        from skillrl.policies.model_settings import ModelSettings

        folder = self.files.checkpoint(cycle)
        settings = ModelSettings.load(folder)
        if settings is None:
            return
        summary = summarise(episodes)
        low, high = summary.success_interval
        figures = {
            **settings.figures,
            "test_goals": summary.episodes,
            "test_successes": summary.successes,
            "test_success_ci95": [low, high],
            "test_mean_score": summary.mean_score,
            "max_turns": self.config.max_turns,
        }
        dataclasses.replace(settings, figures=figures).save(folder)

    def model_settings(self, metrics: CycleMetrics) -> ModelSettings:
        """Return the settings a checkpoint of this run is played under (its ``skillrl.json``).

        The prompts the weights were trained on: skills, prompt budget, decoding, environment
        options, as the evaluation played them; with the cycle's test figures when it evaluated
        test goals, so ``--model auto`` can weigh the checkpoint against the shipped adapter.
        """
        from skillrl.policies.model_settings import ModelSettings
        from skillrl.prompts import PromptConfig

        config, runner = self.config, self.eval_runner
        prompt = runner.prompt_config or PromptConfig()
        figures: dict[str, Any] = {}
        if metrics.eval is not None and config.eval_split == TEST_SPLIT:
            low, high = metrics.eval.success_interval
            figures = {
                "test_goals": metrics.eval.episodes,
                "test_successes": metrics.eval.successes,
                "test_success_ci95": [low, high],
                "test_mean_score": metrics.eval.mean_score,
                "max_turns": config.max_turns,
            }
        return ModelSettings(
            env_id=config.env_id,
            skills=config.skills,
            max_prompt_tokens=prompt.max_prompt_tokens,
            constrained=runner.constrained,
            temperature=config.eval_temperature,
            env_options={k: v for k, v in config.env_config.items() if k != "max_turns"},
            recipe=f"skillrl train --config {self.files.config_path} --cycles {metrics.cycle}",
            figures=figures,
        )

    @staticmethod
    def _current(state: RunState, cycle: int) -> CycleMetrics:
        """Return what the cycle in progress measured so far (kept in ``state.current``)."""
        return CycleMetrics.from_row({**state.current, "cycle": cycle})

    def _measured(self, state: RunState, cycle: int, **sections: Any) -> None:
        """Add a phase's figures to the cycle in progress (in ``state.current``, kept on resume)."""
        figures = self._current(state, cycle).with_figures(**sections).to_row()
        state.current = {k: v for k, v in figures.items() if k != "cycle"}

    def _snapshot(self, cycle: int) -> BankChanges:
        name = snapshot_name(self.files.root.name, cycle)
        known = {s.name for s in self.bank.snapshots.list()}
        if name not in known:
            self.bank.snapshots.create(name)
        churn = None
        previous = snapshot_name(self.files.root.name, cycle - 1)
        if cycle > 0 and previous in known:
            diff = self.bank.snapshots.diff(previous, name)
            churn = len(diff.added) + len(diff.removed) + len(diff.changed)
        return BankChanges(size=self.bank.count(), snapshot=name, churn=churn)
