"""Which cycle a training run leaves: the one that did best on its evaluation goals.

A run whose evaluation goals are not test goals (``--eval-split eval``) chooses among its
evaluated cycles, cycle 0 (the starting model) included: most successes, then the higher mean
score, then the earlier cycle (the fewer updates, when two tie). The choice is written to the
run's ``best.json`` as a :class:`RunChoice`; ``skillrl runs``, ``--model auto`` and
``skillrl view`` read it. Test goals never take part in the choice: they are played at cycle 0
and for the chosen cycle only (``--test-goals``), and the two are compared goal by goal
(:class:`PairedTest`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from skillrl_core.records import EpisodeRecord
from skillrl_core.significance import discordant, mcnemar_exact


@dataclass(frozen=True)
class EvaluatedCycle:
    """One evaluated cycle's figures on the evaluation goals."""

    cycle: int
    successes: int
    episodes: int
    mean_score: float


def evaluated_cycles(history: Sequence[dict[str, Any]]) -> list[EvaluatedCycle]:
    """Return the cycles of ``history`` (``metrics.jsonl`` rows) that evaluated, in order."""
    # Here, not at the top: the metrics reader brings torch, and reading best.json (`runs`,
    # `--model auto`) must not.
    from trainers.cycle.cycle_metrics import CycleMetrics

    found = []
    for row in history:
        metrics = CycleMetrics.from_row(row)
        if metrics.eval is not None and metrics.eval.episodes > 0:
            found.append(
                EvaluatedCycle(
                    metrics.cycle,
                    metrics.eval.successes,
                    metrics.eval.episodes,
                    metrics.eval.mean_score,
                )
            )
    return sorted(found, key=lambda e: e.cycle)


def choose_cycle(history: Sequence[dict[str, Any]]) -> EvaluatedCycle | None:
    """Return the best evaluated cycle (None: none evaluated yet).

    Most successes, then the higher mean score, then the earlier cycle.
    """
    return max(
        evaluated_cycles(history),
        key=lambda e: (e.successes, e.mean_score, -e.cycle),
        default=None,
    )


def evaluations_since_best(history: Sequence[dict[str, Any]]) -> int:
    """How many evaluations came after the best one (0 when the last evaluation is the best)."""
    best = choose_cycle(history)
    if best is None:
        return 0
    return sum(1 for e in evaluated_cycles(history) if e.cycle > best.cycle)


@dataclass(frozen=True)
class PairedTest:
    """The starting model and the chosen cycle on the same test goals, goal by goal."""

    goals: int
    start_successes: int
    chosen_successes: int
    won: int
    """Goals the chosen cycle solved and the start did not."""
    lost: int
    """Goals the start solved and the chosen cycle did not."""
    p_value: float
    """Exact two-sided McNemar p on the discordant goals."""
    start_mean_score: float
    chosen_mean_score: float

    @classmethod
    def of(cls, start: Sequence[EpisodeRecord], chosen: Sequence[EpisodeRecord]) -> PairedTest:
        """Pair two plays of the same goals (same order)."""
        pairs = list(zip(start, chosen, strict=True))
        lost, won = discordant((a.success for a, _ in pairs), (b.success for _, b in pairs))
        count = max(len(pairs), 1)
        return cls(
            goals=len(pairs),
            start_successes=sum(bool(a.success) for a, _ in pairs),
            chosen_successes=sum(bool(b.success) for _, b in pairs),
            won=won,
            lost=lost,
            p_value=mcnemar_exact(lost, won),
            start_mean_score=sum(a.score for a, _ in pairs) / count,
            chosen_mean_score=sum(b.score for _, b in pairs) / count,
        )


@dataclass(frozen=True)
class RunChoice:
    """What ``best.json`` holds: the cycle a run chose, and how it fared on test goals."""

    cycle: int
    """The chosen cycle (0: no cycle beat the starting model)."""
    checkpoint: str | None
    """Its checkpoint folder, relative to the run folder (None for cycle 0: the run's starting
    model, which the run did not save)."""
    evaluation: EvaluatedCycle
    """Its figures on the evaluation goals it was chosen on."""
    evaluation_split: str
    stopped_early_after: int | None = None
    """The cycle after which ``--patience`` stopped the run (None: it ran every cycle)."""
    test: PairedTest | None = None
    """Cycle 0 and the chosen cycle on the first ``--test-goals`` test goals, once played."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunChoice:
        """Read ``best.json``'s object back; ValueError or TypeError when it does not fit."""
        evaluation = EvaluatedCycle(**data["evaluation"])
        test = data.get("test")
        cycle, checkpoint = data["cycle"], data.get("checkpoint")
        if isinstance(cycle, bool) or not isinstance(cycle, int) or cycle < 0:
            raise ValueError(f"'cycle' ({cycle!r}) must be an integer >= 0")
        if checkpoint is not None and not isinstance(checkpoint, str):
            raise ValueError(f"'checkpoint' ({checkpoint!r}) must be a folder name or null")
        return cls(
            cycle=cycle,
            checkpoint=checkpoint,
            evaluation=evaluation,
            evaluation_split=str(data["evaluation_split"]),
            stopped_early_after=data.get("stopped_early_after"),
            test=PairedTest(**test) if isinstance(test, dict) else None,
        )
