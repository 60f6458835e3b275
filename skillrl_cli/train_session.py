"""How ``skillrl train`` (and ``sft``, ``eval``) show a run: progress bars, lines around them.

The settings a training run goes with and the run itself are the library's
(:mod:`skillrl_cli.library`: :class:`~skillrl_cli.library.TrainSettings`, which
``train_setup.settle_training`` builds, and :func:`~skillrl_cli.library.train`); this module
says what the run will do, wires its events to rich progress bars and prints what it measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillrl_cli.options import decoding_line
from skillrl_core.errors import ConfigError

if TYPE_CHECKING:
    from skillrl_cli.library import TrainSettings
    from trainers.common.phased_run import PhaseStarted, RunEvents
    from trainers.common.policy_rollouts import RolloutProgress
    from trainers.cycle.checkpoint_choice import RunChoice
    from trainers.cycle.config import CycleConfig
    from trainers.cycle.cycle_metrics import BankWorth, CycleMetrics
    from trainers.cycle.processes import Processes
    from trainers.cycle.run_files import RunState


class PhaseBars:
    """A run's progress: one bar over its phases, one for the current phase's episodes or steps.

    On a terminal these are rich bars. Anywhere else (a pipe, ``nohup``, a CI log) a bar that
    redraws in place shows nothing until the end, so the same calls print plain lines on the
    on stderr instead (``lines``), as Hugging Face's Trainer logs: one when a phase starts, and
    one at most every :attr:`interval` seconds during it (done/total, rate, time left).
    """

    interval: float = 30.0
    """Seconds between two plain progress lines of the same phase."""

    def __init__(self, console: Any, description: str, total: int, lines: Any = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
        )
        self.lines = lines if lines is not None else Console(stderr=True)
        self.plain = not console.is_terminal
        self.progress = Progress(*columns, console=console, transient=False, disable=self.plain)
        self.task = self.progress.add_task(description, total=total)
        self._detail = self.progress.add_task("", total=1, visible=False)
        self._phases_done, self._phases_total = 0, total
        self._started = time.monotonic()
        self._detail_started = self._last_line = self._started
        self._steps, self._turns_last = "", 0
        self.rollout_label = "  rollout:"
        """What :meth:`show_rollout`'s callback calls the episodes played (set per phase)."""

    def phase(self, description: str) -> None:
        """Start a phase named ``description`` (hiding the finished phase's detail bar)."""
        self.progress.update(self.task, description=description)
        self.hide_detail()
        if self.plain:
            clock = _clock(time.monotonic() - self._started)
            self._line(f"[{self._phases_done}/{self._phases_total} phases, {clock}] {description}")

    def advance(self) -> None:
        """Count one more phase done."""
        self.progress.advance(self.task)
        self._phases_done += 1

    def phases_done(self, done: int) -> None:
        """Start the phase bar at ``done`` (a resumed run)."""
        self.progress.update(self.task, completed=done)
        self._phases_done = done

    def follow(self, events: RunEvents, describe: Callable[[PhaseStarted], str]) -> RunEvents:
        """Show a run's phases: each one started, named by ``describe``; each one ended, counted.

        Every command that runs a phased run (``train``, ``sft``) wires its bars here.
        """
        from trainers.common.phased_run import PhaseEnded, PhaseStarted

        def started(event: PhaseStarted) -> None:
            self.phase(describe(event))

        return events.on(PhaseStarted, started).on(PhaseEnded, lambda _event: self.advance())

    def show(self, label: str) -> Callable[[int, int], None]:
        """Return a ``(done, total)`` callback that shows ``label``'s progress on the detail bar."""
        return lambda done, total: self._count(label, done, total)

    def optimizer_stepped(self, done: int, total: int) -> None:
        """Count an update's optimizer steps; the detail bar says them beside the turns trained."""
        self._steps = f", optimizer steps {done}/{total}"

    def turns_trained(self, done: int, total: int) -> None:
        """Show an update's turns trained inside its optimizer step (one step can take minutes)."""
        if done <= self._turns_last:  # the counter started again: a new update, no step taken yet
            self._steps = ""
        self._turns_last = done
        self._count(f"  turns trained{self._steps}", done, total)

    def _count(self, label: str, done: int, total: int) -> None:
        self.progress.update(
            self._detail, description=label, completed=done, total=total, visible=True
        )
        now = time.monotonic()
        if self.plain and (now - self._last_line >= self.interval or done == total):
            rate = _rate(done, total, now - self._detail_started)
            self._line(f"{label.strip()} {done}/{total}{rate}")

    def show_rollout(self, label: str | None = None) -> Callable[[RolloutProgress], None]:
        """Return an ``on_progress`` callback that shows a rollout's episodes and turns.

        ``label`` names what is played; None reads :attr:`rollout_label` at each call, so one
        callback says ``goals:`` while an evaluation plays and ``rollout:`` while groups do.

        The detail bar runs over the rollout's turn budget; its text gives the episodes and
        turns played, turns/s and at most how long is left (off a terminal: a plain line at
        most every :attr:`interval` seconds, and one at the end).
        """

        def update(progress: RolloutProgress) -> None:
            text, shown = rollout_text(progress), label or self.rollout_label
            self.progress.update(
                self._detail,
                description=f"{shown} {text}",
                completed=progress.budget_spent,
                total=progress.turn_budget,
                visible=True,
            )
            now = time.monotonic()
            ended = progress.episodes_done == progress.episodes
            if self.plain and (now - self._last_line >= self.interval or ended):
                self._line(f"{shown.strip()} {text}")

        return update

    def hide_detail(self) -> None:
        """Hide the detail bar (a phase ended)."""
        self.progress.update(self._detail, visible=False, completed=0)
        self._detail_started = time.monotonic()

    def _line(self, text: str) -> None:
        self._last_line = time.monotonic()
        self.lines.print(text, highlight=False, markup=False)

    def __enter__(self) -> PhaseBars:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)


def rollout_text(progress: RolloutProgress) -> str:
    """``episodes 3/16, turns 45, 2.10 turns/s, at most 0:01:10 left`` for a rollout."""
    text = f"episodes {progress.episodes_done}/{progress.episodes}, turns {progress.turns}"
    if progress.turns_per_second > 0:
        text += f", {progress.turns_per_second:.2f} turns/s"
    left = progress.seconds_left
    if left is not None and progress.episodes_done < progress.episodes:
        text += f", at most {_clock(left)} left"
    return text


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{seconds:02d}"


def _rate(done: int, total: int, seconds: float) -> str:
    """``, 1.23/s, 0:04:10 left`` (nothing before the first item)."""
    if done <= 0 or seconds <= 0:
        return ""
    rate = done / seconds
    return f", {rate:.2f}/s, {_clock((total - done) / rate)} left"


def run_folder(workspace: str, run_name: str) -> Path:
    """Where a run's files live; a name that is not a plain folder name is refused.

    Plain: not empty, no surrounding spaces, no ``/``, nothing unprintable (NUL, a line break),
    not starting with ``.`` (so a name never leaves ``<workspace>/runs/`` nor hides there).
    """
    from skillrl.workspace import resolve_workspace

    plain = run_name.strip() == run_name and not run_name.startswith(".")
    if not run_name.strip() or not plain or "/" in run_name or not run_name.isprintable():
        raise ConfigError(
            f"--run-name ({run_name!r}) must be a plain folder name: not empty, no surrounding "
            "spaces, no '/', no line break or other control character, not starting with '.'"
        )
    return resolve_workspace(workspace) / "runs" / run_name


ESTIMATOR_WORDS = {
    "grpo": ("GRPO", "group-relative advantages"),
    "rft": ("RFT", "rejection-sampling fine-tuning on the episodes that succeeded"),
}
"""How the screen names each ``--estimator`` (short, and what it does)."""


def opening_lines(settings: TrainSettings, state: RunState | None) -> list[str]:
    """Say what a run will do, before the model loads (rich markup).

    The model, the environment, the update, the cycle plan and the run folder; ``state`` is
    the saved state of the run a ``--resume`` continues (None: a fresh start), said with the
    cycle it goes on from.
    """
    from rich.markup import escape

    from skillrl_cli.options import model_line

    cycle, grpo = settings.cycle, settings.grpo
    short, what = ESTIMATOR_WORDS[grpo.estimator]
    options = "".join(f", {k}={v}" for k, v in sorted(cycle.env_config.items()))
    skills = "skills retrieved every turn" if cycle.skills else "no skills"
    lora = f"LoRA r={grpo.lora_r}" if grpo.use_peft else "all weights"
    evaluated = (
        f"{cycle.eval_goals} {cycle.eval_split} goals evaluated every {cycle.eval_every} "
        "cycle(s) and at the last"
        if cycle.eval_goals
        else "no evaluation"
    )
    if cycle.chooses_checkpoint:
        evaluated += "; the run keeps the cycle that solves the most"
        if cycle.patience:
            evaluated += f" and stops after {cycle.patience} evaluation(s) in a row behind it"
        if cycle.test_goals:
            evaluated += f"; {cycle.test_goals} test goals played at cycle 0 and by that cycle"
    lines = [
        model_line(settings.policy.model),
        f"environment: {cycle.env_id}{escape(options)}, {skills}",
        f"update: {short} ({what}), {lora}, learning rate {grpo.learning_rate:g}",
        f"cycles: {cycle.cycles} of {cycle.goals_per_cycle} training goals x {cycle.group_size} "
        f"episodes, after cycle 0's baseline; {evaluated}",
        f"run: {escape(settings.folder.name)} in {escape(str(settings.folder))}",
    ]
    if state is not None:
        lines.append(resume_line(state, cycle.cycles))
    return lines


def resume_command(argv: list[str]) -> str:
    """Return the command that continues an interrupted run: the one given, with ``--resume``.

    ``argv`` is the command line after ``skillrl`` (``sys.argv[1:]``); options already given
    stay, since a resume must repeat them (``train`` refuses others than the run's).
    """
    import shlex

    words = ["skillrl", *argv]
    if "--resume" not in argv:
        words.append("--resume")
    return shlex.join(words)


def interrupted_line(argv: list[str], started: bool) -> str:
    """Return the line Ctrl-C ends a training command with (rich markup): how to go on.

    ``started``: the run folder holds a run (its state), so ``--resume`` continues it.
    """
    from rich.markup import escape

    if not started:
        return "[yellow]interrupted before the run started: nothing to resume[/]"
    return (
        "[yellow]interrupted: completed phases are kept; continue with[/] "
        f"{escape(resume_command(argv))}"
    )


def resume_line(state: RunState, cycles: int) -> str:
    """Say from where a resumed run goes on."""
    if state.done and state.cycle > cycles:
        return f"[yellow]resuming: all {cycles} cycles are done; --cycles N runs more[/]"
    after = f" after its {state.phase} phase" if state.phase else ""
    return f"[yellow]resuming at cycle {state.cycle}{after} (of {cycles})[/]"


PHASE_WORDS = {
    "rollout": "rolling out groups",
    "update": "{estimator} update",
    "eval": "evaluating",
    "distill": "distilling",
    "evolve": "evolving the bank",
    "save": "saving",
}
"""What the progress line says while a cycle's phase runs (by ``CyclePhase`` value)."""


def evaluation_words(cycle: CycleConfig, index: int) -> str:
    """Return what cycle ``index``'s evaluation phase plays, for its progress line.

    The evaluation goals and, where the run plays them in that phase too, the test goals (cycle
    0, ``--test-goals``) or the evaluation goals again with the cycle-0 bank
    (``--compare-starting-bank``).
    """
    if not cycle.eval_goals:
        return "no evaluation goals (--eval-goals 0)"
    words = f"evaluating {cycle.eval_goals} {cycle.eval_split} goals"
    if index == 0 and cycle.test_goals:
        words += f", then {cycle.test_goals} test goals (played now and by the chosen cycle only)"
    if index > 0 and cycle.compare_starting_bank:
        words += ", then the same goals with the cycle-0 bank"
    return words


def run_with_progress(
    settings: TrainSettings, processes: Processes | None = None, *, as_json: bool = False
) -> RunState:
    """Run :func:`~skillrl_cli.library.train` under rich progress bars, saying what it does.

    Before: what the run will do; during: its phases and a line per cycle; after: the cycle it
    chose and where its files are. Under a launcher (``processes``,
    :class:`trainers.cycle.processes.Processes`) only the main process shows anything. With
    ``as_json`` (``train --json``) all of it goes to stderr, leaving stdout to the metrics.
    """
    from rich.console import Console

    from skillrl_cli.library import TrainWatch, train
    from trainers.common.phased_run import HeldOutPlayStarted, RunEvents
    from trainers.cycle.processes import Processes
    from trainers.cycle.run_files import RunFiles

    processes = processes or Processes()
    cycle = settings.cycle
    console = Console(stderr=as_json, quiet=not processes.is_main)
    files = RunFiles(settings.folder)
    saved = files.load_state() if settings.resume and files.exists() else None
    for line in opening_lines(settings, saved):
        console.print(line, soft_wrap=True)  # a wrapped path cannot be copied
    console.print(decoding_line(settings.constrained))
    with PhaseBars(console, "starting (phases)", phases_total(cycle)) as bars:
        if saved is not None:  # the bar starts at the phases already done
            bars.phases_done(phases_done(saved, cycle))
        estimator = ESTIMATOR_WORDS[settings.grpo.estimator][0]

        def described(event: PhaseStarted) -> str:
            if event.phase == "eval":
                words = evaluation_words(cycle, event.index)
            else:
                words = PHASE_WORDS[event.phase].format(estimator=estimator)
            bars.rollout_label = "  goals:" if event.phase == "eval" else "  rollout:"
            return f"cycle {event.index}: {words}"

        def held_out(event: HeldOutPlayStarted) -> None:
            bars.rollout_label = "  goals:"
            bars.phase(
                f"cycle {event.index} (chosen): playing {event.goals} test goals, paired with "
                "cycle 0's"
            )

        events = bars.follow(RunEvents(), described).on(HeldOutPlayStarted, held_out)
        watch = TrainWatch(
            rollout=bars.show_rollout(),
            optimizer_steps=bars.optimizer_stepped,
            turns_trained=bars.turns_trained,
            cycle_saved=lambda metrics: print_cycle(console, metrics),
        )
        result = train(settings, events=events, watch=watch, processes=processes)
    print_choice(console, result.choice)
    print_bank_worth(console, result.history)
    console.print(
        f"[green]done[/]: metrics {result.files.metrics_path}, curve {result.files.curve_path}"
    )
    return result.state


def phases_done(state: RunState, cycle: CycleConfig) -> int:
    """Count the phases a resumed run has already completed."""
    from trainers.cycle.run_files import run_phases

    return sum(state.completed(c, phase) for c, phase in run_phases(cycle))


def phases_total(cycle: CycleConfig) -> int:
    """Count the phases of a whole run (cycle 0's two, then each cycle's)."""
    from trainers.cycle.run_files import run_phases

    return len(run_phases(cycle))


def print_choice(console: Any, choice: RunChoice | None) -> None:
    """Say which cycle the run leaves and, with test goals, how it fared against cycle 0."""
    if choice is None:
        return
    where = choice.checkpoint or "its starting model: no cycle beat it"
    stopped = ""
    if choice.stopped_early_after is not None:
        stopped = f"; stopped early after cycle {choice.stopped_early_after} (--patience)"
    console.print(
        f"chosen: cycle {choice.cycle} ({where}), {choice.evaluation.successes}/"
        f"{choice.evaluation.episodes} {choice.evaluation_split} goals{stopped}",
        soft_wrap=True,
    )
    test = choice.test
    if test is not None:
        console.print(
            f"test goals: {test.chosen_successes}/{test.goals} with the chosen cycle, "
            f"{test.start_successes}/{test.goals} at cycle 0 ({test.won} won, {test.lost} lost, "
            f"exact McNemar p = {test.p_value:.2g})"
        )


def print_cycle(console: Any, metrics: CycleMetrics) -> None:
    """Print what one cycle measured on one line (from memory: the row it wrote is the same)."""
    parts = [f"cycle {metrics.cycle}"]
    if metrics.eval is not None and metrics.eval.episodes == 0:
        parts.append("no evaluation goals (--eval-goals 0)")
    elif metrics.eval is not None:
        parts += [
            f"success {metrics.eval.success_rate:.2f}",
            f"score {metrics.eval.mean_score:.3f}",
        ]
    else:
        parts.append("not evaluated (--eval-every)")
    if metrics.train is not None:
        parts.append(f"training success {metrics.train.success_rate:.2f}")
    if metrics.update is not None:
        groups = metrics.groups
        kept = f"{groups.kept}/{groups.dropped}" if groups is not None else "?/?"
        parts += [
            f"loss {metrics.update.step.loss:+.4f}",
            f"kept/dropped groups {kept}",
            f"{metrics.update.step.tokens_per_second:.0f} tok/s",
        ]
    if metrics.bank.size is not None:
        parts.append(f"bank {metrics.bank.size}")
    if metrics.bank_worth is not None:
        parts.append(bank_worth_text(metrics.bank_worth))
    console.print("  ".join(parts))


def bank_worth_text(worth: BankWorth) -> str:
    """Return the evolved bank against the cycle-0 bank on the same evaluation goals, in words."""
    return (
        f"evolved bank {worth.evolved_successes}/{worth.goals} vs cycle-0 bank "
        f"{worth.starting_successes}/{worth.goals} ({worth.won} won, {worth.lost} lost, "
        f"exact McNemar p = {worth.p_value:.2g})"
    )


def print_bank_worth(console: Any, history: list[dict[str, Any]]) -> None:
    """Say what the bank's evolution was worth at the last cycle that measured it."""
    from trainers.cycle.cycle_metrics import CycleMetrics

    measured = [m for m in map(CycleMetrics.from_row, history) if m.bank_worth is not None]
    if measured:
        last = measured[-1]
        console.print(f"cycle {last.cycle}: {bank_worth_text(last.bank_worth)}", soft_wrap=True)
