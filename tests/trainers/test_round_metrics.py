"""A cold-start round's metrics: one typed record, written as the rows cold starts always wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from trainers.cold_start.round_metrics import (
    DaggerFigures,
    DataFigures,
    RoundMetrics,
    SourceFigures,
    TrainFigures,
)
from trainers.cold_start.sft_config import SOURCES

TRAINED = {
    "train.global_step": 12, "train.loss": 0.41, "train.examples": 96,
    "train.target_tokens": 1500, "train.seconds": 310.0, "train.cpu_seconds": 590.5,
}  # fmt: skip

BEHAVIOUR_CLONING = {
    "round": 0,
    "data.examples": 96, "data.dataset_examples": 96, "data.seconds": 20.5,
    "data.cpu_seconds": 35.25,
    "data.expert_episodes": 16, "data.expert_success_rate": 1.0,
    "data.bank_episodes": 4, "data.bank_success_rate": 1.0,
    **TRAINED,
    "checkpoint": "runs/r/sft/checkpoints/round-0000",
}  # fmt: skip
"""Round 0 as a run wrote it before the metrics were typed (two demonstration sources)."""

DAGGER = {
    "round": 1,
    "data.examples": 30, "data.dataset_examples": 126, "data.seconds": 40.0,
    "data.cpu_seconds": 70.0,
    "dagger.states": 48, "dagger.mistakes": 30, "dagger.episodes": 8,
    "dagger.success_rate": 0.25, "dagger.mean_turns": 6.0,
    **TRAINED,
    "checkpoint": "runs/r/sft/checkpoints/round-0001",
}  # fmt: skip
"""A DAgger round as a run wrote it before the metrics were typed."""


def test_rows_read_into_typed_sections_and_write_back_the_same():
    bc = RoundMetrics.from_row(BEHAVIOUR_CLONING)
    assert bc.round == 0 and bc.data == DataFigures(96, 96, 20.5, 35.25)
    assert bc.sources == {"expert": SourceFigures(16, 1.0), "bank": SourceFigures(4, 1.0)}
    assert bc.dagger is None and bc.train == TrainFigures(12, 0.41, 96, 1500, 310.0, 590.5)
    assert bc.to_row() == BEHAVIOUR_CLONING
    dagger = RoundMetrics.from_row(DAGGER)
    assert dagger.dagger == DaggerFigures(8, 0.25, 6.0, states=48, mistakes=30)
    assert dagger.sources == {} and dagger.to_row() == DAGGER


def test_a_row_round_trips_through_the_json_of_state_and_metrics_files():
    for row in (BEHAVIOUR_CLONING, DAGGER):
        text = json.dumps(RoundMetrics.from_row(row).to_row(), sort_keys=True)
        assert text == json.dumps(row, sort_keys=True)
        assert RoundMetrics.from_row(json.loads(text)) == RoundMetrics.from_row(row)


def test_a_dagger_row_from_before_the_state_counts_reads_and_writes_back_unchanged():
    old = {k: v for k, v in DAGGER.items() if k not in ("dagger.states", "dagger.mistakes")}
    metrics = RoundMetrics.from_row(old)
    assert metrics.dagger == DaggerFigures(8, 0.25, 6.0)
    assert metrics.to_row() == old


def test_a_round_in_progress_has_its_data_and_no_training():
    # state.json's ``current`` after the data phase: the row without round, train or checkpoint.
    current = {k: v for k, v in DAGGER.items() if k.startswith(("data.", "dagger."))}
    metrics = RoundMetrics.from_row({**current, "round": 1})
    assert metrics.train is None and metrics.checkpoint is None
    assert metrics.data.dataset_examples == 126
    assert metrics.to_row() == {**current, "round": 1}


def test_a_section_missing_a_key_reads_as_absent():
    damaged = {k: v for k, v in DAGGER.items() if k != "train.loss"}
    assert RoundMetrics.from_row(damaged).train is None
    assert RoundMetrics.from_row({"round": 0}) == RoundMetrics(0)
    half = {"round": 0, "data.expert_episodes": 3}  # a source without its success rate
    assert RoundMetrics.from_row(half).sources == {}


def test_the_rounds_phases_sum_to_its_seconds():
    metrics = RoundMetrics.from_row(DAGGER)
    assert metrics.seconds == 40.0 + 310.0 and metrics.cpu_seconds == 70.0 + 590.5
    unmeasured = RoundMetrics(2, data=DataFigures(1, 1, 2.0, 3.0))
    assert (unmeasured.seconds, unmeasured.cpu_seconds) == (2.0, 3.0)


def test_every_key_the_record_reads_is_one_cold_starts_have_written():
    # Every section filled, every source: the keys are exactly the ones the untyped cold start
    # wrote, so a row from an older run folder reads whole and a new row reads in older code.
    full = RoundMetrics(
        3,
        data=DataFigures(1, 2, 3.0, 4.0),
        sources={source: SourceFigures(1, 0.5) for source in SOURCES},
        dagger=DaggerFigures(1, 0.5, 2.0, states=3, mistakes=1),
        train=TrainFigures(1, 0.5, 1, 10, 2.0, 3.0),
        checkpoint="c",
    )
    written = {
        *BEHAVIOUR_CLONING, *DAGGER, "data.teacher_episodes", "data.teacher_success_rate",
    }  # fmt: skip
    assert set(full.to_row()) == written
    assert RoundMetrics.from_row(full.to_row()) == full


def test_the_record_loads_without_torch():
    script = "import sys\nimport trainers.cold_start.round_metrics\nprint('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=300)  # fmt: skip
    assert done.stdout.strip() == "False", done.stderr


def test_a_dagger_row_with_declined_states_round_trips():
    row = {**DAGGER, "dagger.declined": 5}
    metrics = RoundMetrics.from_row(row)
    assert metrics.dagger == DaggerFigures(8, 0.25, 6.0, states=48, mistakes=30, declined=5)
    assert metrics.to_row() == row
