"""The files of one training run, and the state that makes ``--resume`` exact.

Layout of ``<workspace>/runs/<name>/``::

    config.json          its settings: the CycleConfig and GRPOConfig, and the launching
                         command's options (run_settings)
    state.json           last completed (cycle, phase), goal cursor, per-cycle metrics
    metrics.jsonl        one JSON line per completed cycle (rewritten atomically)
    tensorboard/         the same metrics as TensorBoard scalars (--report-to tensorboard)
    cycles/<c>/          rollout.json, eval.json, validation.json: the episodes of each phase;
                         advantages.json: each trained turn's advantage and its parts
    trainer_state/       trainable weights + AdamW state after the last update (safetensors)
    checkpoints/cycle-<c>/   from_pretrained-loadable model + tokenizer (LoRA: peft's adapter
                         over the starting model), skillrl.json: the settings it plays under
    learning_curve.png   success (95% band) and score per evaluated cycle, wall minutes, at the end
    best.json            the cycle the run chose on its evaluation goals, when those are not test
                         goals (trainers.cycle.checkpoint_choice), and its paired test figures
    best_weights.safetensors   that cycle's trainable weights (what the final test plays)

Every file is written through a temp file (or folder) and a rename, and ``state.json`` is written
last in each phase: a phase either counts as done with all its files in place, or is redone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from skillrl_core.errors import CheckpointError, DataFileError
from skillrl_core.files import atomic_write_json, atomic_write_text, read_json_object
from skillrl_core.records import EpisodeRecord
from trainers.common.phased_run import Phase
from trainers.common.run_state import (
    CONFIG_FILE,
    STATE_FILE,
    PhasedRunState,
    check_count,
    read_run_state,
)
from trainers.cycle.checkpoint_choice import RunChoice
from trainers.cycle.cycle_rollout import RolloutPhase
from trainers.update.update_record import UpdateRecord

if TYPE_CHECKING:
    from trainers.cycle.config import CycleConfig


class CyclePhase(Phase):
    """The phases of a training cycle, in order (cycle 0 only runs ``eval`` and ``save``)."""

    ROLLOUT = "rollout"
    DISTILL = "distill"
    UPDATE = "update"
    EVAL = "eval"
    EVOLVE = "evolve"
    SAVE = "save"


def cycle_phases(config: CycleConfig, cycle: int) -> tuple[CyclePhase, ...]:
    """Return the phases ``cycle`` of a run under ``config`` runs, in order.

    Cycle 0 evaluates and saves; a later cycle runs every phase, ``eval`` only when
    ``config.evaluates(cycle)`` (``--eval-every``).
    """
    if cycle == 0:
        return (CyclePhase.EVAL, CyclePhase.SAVE)
    return tuple(p for p in CyclePhase if p is not CyclePhase.EVAL or config.evaluates(cycle))


def run_phases(config: CycleConfig) -> list[tuple[int, CyclePhase]]:
    """Return every ``(cycle, phase)`` of a whole run under ``config``, in order."""
    return [(c, phase) for c in range(config.cycles + 1) for phase in cycle_phases(config, c)]


@dataclass
class RunState(PhasedRunState):
    """Where an improvement run stands; written after every completed phase."""

    stage_field: ClassVar[str] = "cycle"
    phases: ClassVar[type[Phase]] = CyclePhase

    cycle: int = 0
    """The cycle in progress (once ``done``: the next one a longer ``--cycles`` would run)."""
    goal_cursor: int = 0
    """Position in the shuffled training-goal order where the next rollout starts."""
    stopped_early_after: int | None = None
    """The cycle after which ``--patience`` stopped the run (None: not stopped)."""
    tested: bool = False
    """The chosen cycle has played the test goals (``--test-goals``; the run's last step)."""

    def check_fields(self) -> None:
        """Raise ValueError naming the first field of a wrong type or value."""
        super().check_fields()
        check_count("goal_cursor", self.goal_cursor)
        stopped = self.stopped_early_after
        if stopped is not None and (isinstance(stopped, bool) or not isinstance(stopped, int)):
            raise ValueError(f"'stopped_early_after' ({stopped!r}) must be a cycle or null")
        if not isinstance(self.tested, bool):
            raise ValueError(f"'tested' ({self.tested!r}) must be true or false")


class RunFiles:
    """Paths and atomic reads/writes of one run folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state_path = root / STATE_FILE
        self.config_path = root / CONFIG_FILE
        self.metrics_path = root / "metrics.jsonl"
        self.trainer_state = root / "trainer_state"
        self.tensorboard = root / "tensorboard"
        self.curve_path = root / "learning_curve.png"
        self.choice_path = root / "best.json"
        self.best_weights = root / "best_weights.safetensors"
        self.starting_bank = root / "starting_bank"
        """A copy of the bank as it was at cycle 0 (``CycleConfig.compare_starting_bank``)."""

    def cycle_dir(self, cycle: int) -> Path:
        """Folder of one cycle's episode files."""
        return self.root / "cycles" / f"{cycle:04d}"

    def checkpoint(self, cycle: int) -> Path:
        """Checkpoint folder of a cycle."""
        return self.root / "checkpoints" / f"cycle-{cycle:04d}"

    def save_choice(self, choice: RunChoice) -> None:
        """Write ``best.json`` atomically."""
        atomic_write_json(self.choice_path, choice.to_dict())

    def load_choice(self) -> RunChoice | None:
        """Read ``best.json`` (None: the run chose no cycle; CheckpointError when damaged)."""
        if not self.choice_path.exists():
            return None
        try:
            return RunChoice.from_dict(read_json_object(self.choice_path))
        except DataFileError as error:
            raise CheckpointError(str(error)) from error
        except (KeyError, TypeError, ValueError) as error:
            raise CheckpointError(f"{self.choice_path} is damaged: {error}") from error

    def rollout_cycles(self) -> list[int]:
        """Cycles whose rollout phase is on disk (``cycles/<c>/rollout.json``), in order."""
        found = self.root.glob("cycles/*/rollout.json")
        return sorted(int(p.parent.name) for p in found if p.parent.name.isdigit())

    def exists(self) -> bool:
        """Whether a run was started here."""
        return self.state_path.exists()

    def load_state(self) -> RunState:
        """Read ``state.json`` (CheckpointError, naming the file, when missing or damaged)."""
        return read_run_state(self.state_path, RunState, "run")

    def save_state(self, state: RunState) -> None:
        """Write ``state.json`` atomically (the commit point of a phase)."""
        atomic_write_json(self.state_path, state.to_dict())

    def save_config(self, config: dict[str, Any]) -> None:
        """Write the run's configuration."""
        atomic_write_json(self.config_path, config)

    def load_config(self) -> dict[str, Any]:
        """Read the run's configuration (CheckpointError, naming the file, when damaged)."""
        try:
            data = read_json_object(self.config_path)
        except DataFileError as error:
            raise CheckpointError(str(error)) from error
        for part in ("cycle", "grpo", "options"):
            if part in data and not isinstance(data[part], dict):
                raise CheckpointError(
                    f"{self.config_path} is damaged: {part!r} must be an object, not "
                    f"{type(data[part]).__name__}"
                )
        cycles = data.get("cycle", {}).get("cycles")
        if "cycle" in data and (isinstance(cycles, bool) or not isinstance(cycles, int)):
            raise CheckpointError(
                f"{self.config_path} is damaged: 'cycle.cycles' ({cycles!r}) must be an integer"
            )
        return data

    def save_episodes(self, cycle: int, name: str, payload: dict[str, Any]) -> None:
        """Write ``cycles/<c>/<name>.json`` (episodes as dicts plus extra fields)."""
        atomic_write_json(self.cycle_dir(cycle) / f"{name}.json", payload)

    def save_rollout(self, cycle: int, phase: RolloutPhase) -> None:
        """Write the rollout phase's ``cycles/<c>/rollout.json``."""
        atomic_write_json(self.cycle_dir(cycle) / "rollout.json", phase.to_dict())

    def load_rollout(self, cycle: int) -> RolloutPhase | None:
        """Read what :meth:`save_rollout` wrote (None if absent)."""
        data = self._read(self.cycle_dir(cycle) / "rollout.json")
        if data is None:
            return None
        try:
            return RolloutPhase.from_dict(data)
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            path = self.cycle_dir(cycle) / "rollout.json"
            raise CheckpointError(f"cannot read {path}: {error!r}") from error

    def save_update_record(self, cycle: int, record: UpdateRecord) -> None:
        """Write what cycle ``cycle``'s update trained on: ``cycles/<c>/advantages.json``."""
        atomic_write_json(self.cycle_dir(cycle) / "advantages.json", record.to_dict())

    def load_update_record(self, cycle: int) -> UpdateRecord | None:
        """Read what :meth:`save_update_record` wrote (None if absent: no update, or older run)."""
        path = self.cycle_dir(cycle) / "advantages.json"
        data = self._read(path)
        if data is None:
            return None
        try:
            return UpdateRecord.from_dict(data)
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            raise CheckpointError(f"cannot read {path}: {error!r}") from error

    def load_episodes(self, cycle: int, name: str) -> dict[str, Any] | None:
        """Read what :meth:`save_episodes` wrote, with episodes as records (None if absent)."""
        data = self._read(self.cycle_dir(cycle) / f"{name}.json")
        if data is None:
            return None
        data["episodes"] = [EpisodeRecord.from_dict(e) for e in data.get("episodes", [])]
        return data

    @staticmethod
    def _read(path: Path) -> dict[str, Any] | None:
        if not path.exists():
            return None
        try:  # bytes that are not UTF-8, or a top level that is not an object, are damage too
            return read_json_object(path)
        except DataFileError as error:
            raise CheckpointError(str(error)) from error

    def write_metrics(self, history: list[dict[str, Any]]) -> None:
        """Rewrite ``metrics.jsonl`` with one line per completed cycle."""
        lines = [json.dumps(row, sort_keys=True) for row in history]
        atomic_write_text(self.metrics_path, "\n".join(lines) + ("\n" if lines else ""))


def plot_learning_curve(history: list[dict[str, Any]], path: Path, title: str = "") -> None:
    """Draw :func:`learning_curve_figure` as a PNG at ``path``, atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = learning_curve_figure(history, title)
    tmp = path.with_name(f".{path.name}.tmp.png")
    try:
        figure.savefig(tmp, dpi=100)
    finally:
        plt.close(figure)
    tmp.replace(path)


def learning_curve_figure(history: list[dict[str, Any]], title: str = "") -> Any:
    """Return a matplotlib figure of the evaluation goals' success and score per evaluated cycle.

    Success carries its 95% Wilson band and is drawn above the score; each point is labelled
    with the run's wall minutes at the end of its cycle. Cycles are whole numbers on the x
    axis, and the y axis reaches a little past 1 so a point at 1.0 shows whole.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from trainers.common.episode_metrics import wilson_interval
    from trainers.cycle.cycle_metrics import CYCLE_SECONDS, EVAL_EPISODES, EVAL_MEAN_SCORE
    from trainers.cycle.cycle_metrics import EVAL_SUCCESS_RATE as SUCCESS

    minutes, spent = {}, 0.0
    for row in history:
        spent += float(row.get(CYCLE_SECONDS, 0.0))
        minutes[row["cycle"]] = spent / 60
    evaluated = [row for row in history if SUCCESS in row]  # --eval-every skips
    cycles = [row["cycle"] for row in evaluated]
    success = [row[SUCCESS] for row in evaluated]
    figure, axis = plt.subplots(figsize=(6, 4))
    bands = [
        wilson_interval(round(rate * row[EVAL_EPISODES]), int(row[EVAL_EPISODES]))
        for rate, row in zip(success, evaluated, strict=True)
        if row.get(EVAL_EPISODES)
    ]
    if len(bands) == len(evaluated):
        axis.fill_between(
            cycles, [b[0] for b in bands], [b[1] for b in bands], alpha=0.2,
            color="C0", label="success, 95% interval", zorder=1,
        )  # fmt: skip
    scores = [row.get(EVAL_MEAN_SCORE, 0.0) for row in evaluated]
    # The success line above the score line (it is the figure's point), markers never clipped.
    axis.plot(cycles, scores, "s--", color="C1", label="score", zorder=2, clip_on=False)
    axis.plot(cycles, success, "o-", color="C0", label="success", zorder=3, clip_on=False)
    for cycle, rate in zip(cycles, success, strict=True):
        axis.annotate(f"{minutes.get(cycle, 0.0):.0f} min", (cycle, rate), fontsize=8,
                      textcoords="offset points", xytext=(0, -14), ha="center")  # fmt: skip
    if len(cycles) <= 12:  # a tick at each evaluated cycle, and nowhere else
        axis.set_xticks(cycles)
    else:
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    if len(cycles) == 1:
        axis.set_xlim(cycles[0] - 0.5, cycles[0] + 0.5)
    axis.set_xlabel("cycle (labels: wall minutes at its end)")
    axis.set_ylabel("evaluation goals: success rate, mean score")
    axis.set_ylim(0, 1.05)
    axis.set_title(title or "evaluation goals per cycle")
    axis.legend()
    axis.grid(alpha=0.3)
    return figure
