"""Metric keys declared once: no module names a metrics row key by a string of its own.

An improvement cycle's row is written by :class:`trainers.cycle.cycle_metrics.CycleMetrics`, a
cold-start round's by :class:`trainers.cold_start.round_metrics.RoundMetrics`. Readers (the
CLI, ``skillrl view``, run listings, benchmarks) take typed sections from ``from_row`` or, for
single figures of rows that may hold a section in part, the key constants of
``cycle_metrics``. Every string literal in the code is read with :mod:`ast`; one that is a key
those records write, outside the two modules, fails naming file and line.
"""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

from trainers.cold_start.round_metrics import (
    DaggerFigures,
    DataFigures,
    RoundMetrics,
    SourceFigures,
    TrainFigures,
)
from trainers.cold_start.sft_config import SOURCES
from trainers.common.episode_metrics import EpisodeSummary
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
from trainers.update.grpo import StepMetrics

ROOT = Path(__file__).resolve().parents[1]

WRITERS = frozenset({"trainers/cycle/cycle_metrics.py", "trainers/cold_start/round_metrics.py"})
"""The modules that declare the row keys."""

SOURCE_FOLDERS = ("skillrl_core", "envs", "memory", "skillrl", "trainers", "skillrl_cli")
"""Folders whose modules are scanned, with ``benchmarks/``, ``scripts/`` and ``cli.py``."""


def filled(kind: type) -> object:
    """A section with every field set (the values do not matter, only that none is None)."""
    return kind(**{f.name: 1 for f in fields(kind)})


def written_keys() -> set[str]:
    """Every ``section.field`` key a full cycle row or a full round row holds."""
    cycle = CycleMetrics(
        cycle=1,
        train=filled(TrainingRollouts),
        groups=filled(GroupCounts),
        rollout=filled(RolloutCost),
        update=UpdateFigures(StepMetrics(), 1, sync_seconds=1.0),
        eval=filled(EpisodeSummary),
        sensitivity=filled(SkillSensitivity),
        bank_worth=filled(BankWorth),
        bank=filled(BankChanges),
        seconds=1.0,
        checkpoint="c",
    )
    round_ = RoundMetrics(
        0,
        data=filled(DataFigures),
        sources={source: filled(SourceFigures) for source in SOURCES},
        dagger=filled(DaggerFigures),
        train=filled(TrainFigures),
        checkpoint="c",
    )
    return {key for key in (*cycle.to_row(), *round_.to_row()) if "." in key}


def named_keys(source: str, keys: set[str]) -> list[tuple[int, str]]:
    """(line, key) for every string literal of ``source`` that is one of ``keys``."""
    return [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in keys
    ]


def scanned() -> list[Path]:
    paths = [
        ROOT / "cli.py",
        *(ROOT / "benchmarks").rglob("*.py"),
        *(ROOT / "scripts").rglob("*.py"),
    ]
    for folder in SOURCE_FOLDERS:
        paths += (ROOT / folder).rglob("*.py")
    return sorted(paths)


def test_only_the_writers_name_a_metrics_key_by_its_string():
    keys = written_keys()
    assert {"eval.success_rate", "update.loss", "data.expert_episodes", "dagger.states"} <= keys
    found = []
    for path in scanned():
        relative = path.relative_to(ROOT).as_posix()
        if relative in WRITERS:
            continue
        for line, key in named_keys(path.read_text(encoding="utf-8"), keys):
            found.append(f"{relative}:{line} names {key!r}")
    assert not found, "read these through from_row or a cycle_metrics constant:\n" + "\n".join(
        found
    )


def test_the_scan_catches_a_key_in_a_subscript_and_passes_a_file_name():
    source = 'loss = row["train.loss"]\npath = folder / "rollout.json"\nkey = f"data.{name}"\n'
    assert named_keys(source, written_keys()) == [(1, "train.loss")]
