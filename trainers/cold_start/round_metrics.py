"""What one cold-start round measured: :class:`RoundMetrics`, built by its phases, written once.

The round's ``data`` phase fills :class:`DataFigures` (and, from what the gatherer played,
:class:`SourceFigures` per demonstration source in round 0 or :class:`DaggerFigures` in a DAgger
round); its ``train`` phase adds :class:`TrainFigures` and the checkpoint. The whole is one row of
the run's ``metrics.jsonl`` and ``state.json``'s history (:meth:`RoundMetrics.to_row`:
``section.field`` keys, the keys cold starts have always written, so older run folders read and
resume as they are); a round in progress keeps its figures in ``state.json``'s ``current`` (the
same row form, without ``round``). Readers (the CLI, the cold-start benchmarks) take figures from
:meth:`RoundMetrics.from_row`, never by key. Light on purpose (no torch), so those readers can
import it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from trainers.cold_start.sft_config import SOURCES
from trainers.common.metric_rows import read_section, section_keys


@dataclass(frozen=True)
class DataFigures:
    """A round's gathering: its examples and what the phase cost."""

    examples: int
    """Examples the round gathered (DAgger: those kept, ``dagger_keep``)."""
    dataset_examples: int
    """Examples of every round so far (``dataset.jsonl``)."""
    seconds: float
    """Wall seconds of the phase (a resumed phase adds to what was spent)."""
    cpu_seconds: float
    """CPU seconds of this process in the phase."""


@dataclass(frozen=True)
class SourceFigures:
    """The episodes one demonstration source played in round 0 (``data.<source>_...`` keys)."""

    episodes: int
    success_rate: float


@dataclass(frozen=True)
class DaggerFigures:
    """A DAgger round's learner episodes and the states the expert labelled."""

    episodes: int
    success_rate: float
    """The learner's success while gathering (sampled at ``dagger_temperature``)."""
    mean_turns: float
    states: int | None = None
    """States the learner reached, each labelled (None: a row older than the count)."""
    mistakes: int | None = None
    """Of those, states where the learner's action was not the expert's (None: as ``states``)."""
    declined: int | None = None
    """States the expert had no action to teach at (a deadlocked Sokoban room): not labelled,
    not in ``states`` (None: a row older than the count)."""


@dataclass(frozen=True)
class TrainFigures:
    """A round's fine-tuning."""

    global_step: int
    """Optimizer steps of the round (the same after a kill and ``--resume``)."""
    loss: float
    """Mean training loss over the round's steps (NaN when resumed after the last step)."""
    examples: int
    """Examples the round trained on (``ColdStartConfig.dagger_replay``)."""
    target_tokens: int
    """Tokens that carried loss."""
    seconds: float
    """Wall seconds of the phase, the checkpoint's save included."""
    cpu_seconds: float


_SECTIONS: dict[str, type] = {"data": DataFigures, "dagger": DaggerFigures, "train": TrainFigures}
"""Sections by row prefix; one whose required fields are not all in a row reads as absent."""


@dataclass(frozen=True)
class RoundMetrics:
    """Everything one cold-start round measured; a section is None when it was not measured."""

    round: int
    data: DataFigures | None = None
    sources: dict[str, SourceFigures] = field(default_factory=dict)
    """Round 0's demonstrations by source (empty: a DAgger round, or examples gathered
    before a kill and kept)."""
    dagger: DaggerFigures | None = None
    """A DAgger round's learner episodes (None: round 0, or examples kept after a kill)."""
    train: TrainFigures | None = None
    checkpoint: str | None = None
    """The model saved after the round."""

    @property
    def seconds(self) -> float:
        """Wall seconds of the round's data and train phases (one not measured counts 0)."""
        return (self.data.seconds if self.data else 0.0) + (
            self.train.seconds if self.train else 0.0
        )

    @property
    def cpu_seconds(self) -> float:
        """CPU seconds of the round's data and train phases (one not measured counts 0)."""
        return (self.data.cpu_seconds if self.data else 0.0) + (
            self.train.cpu_seconds if self.train else 0.0
        )

    def with_figures(self, **sections: Any) -> RoundMetrics:
        """Return these metrics with ``sections`` set."""
        return dataclasses.replace(self, **sections)

    def to_row(self) -> dict[str, Any]:
        """Return the metrics as one flat row (``section.field`` keys), the file format."""
        row: dict[str, Any] = {"round": self.round}
        for prefix in _SECTIONS:
            section = getattr(self, prefix)
            if section is not None:
                row.update(section_keys(prefix, section, drop_none=True))
        for source, figures in self.sources.items():
            episodes, success_rate = _source_keys(source)
            row[episodes], row[success_rate] = figures.episodes, figures.success_rate
        if self.checkpoint is not None:
            row["checkpoint"] = self.checkpoint
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RoundMetrics:
        """Read a row back (a section missing one of its required keys counts as absent)."""
        sections = {prefix: read_section(kind, prefix, row) for prefix, kind in _SECTIONS.items()}
        keys = {source: _source_keys(source) for source in SOURCES}
        sources = {
            source: SourceFigures(row[episodes], row[success_rate])
            for source, (episodes, success_rate) in keys.items()
            if episodes in row and success_rate in row
        }
        return cls(
            round=int(row["round"]), sources=sources, checkpoint=row.get("checkpoint"), **sections
        )


def _source_keys(source: str) -> tuple[str, str]:
    """Return the row keys of a source's :class:`SourceFigures`: episodes, success rate."""
    return f"data.{source}_episodes", f"data.{source}_success_rate"
