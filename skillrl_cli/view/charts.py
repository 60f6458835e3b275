"""Learning curves of training runs as SVG geometry: axes with ticks, lines, interval bands.

Pure: rows of ``metrics.jsonl`` in, typed charts out; the run page's template only draws them.
The x axis is the cycle (a run with ``--eval-every`` has evaluation points on some cycles only).
A success rate with its episode count beside it (``eval.success_rate`` and ``eval.episodes``)
gets its 95% Wilson interval as a shaded band, as ``skillrl eval`` reports it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainers.episode_metrics import wilson_interval

WIDTH, HEIGHT = 520, 220
"""Size of one chart's SVG, axes and labels included."""
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 40
"""Margins around the plot area: room for the tick labels and the axis titles."""
COLOURS = ("#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00")
"""Line colour of each compared run, in order."""


@dataclass(frozen=True)
class ChartSpec:
    """Which metric a chart draws and how its axes are labelled."""

    key: str
    """The ``metrics.jsonl`` key drawn."""
    title: str
    """The chart's caption."""
    y_label: str
    """The y axis title (what the values are, in which unit)."""
    scale: float = 1.0
    """Each value is multiplied by this (seconds -> minutes)."""
    unit_range: bool = False
    """The y axis spans at least [0, 1] (rates and scores), else from 0 to the largest value."""
    episodes_key: str | None = None
    """Key of the episode count behind a success rate: its Wilson interval is drawn as a band."""


MAIN_CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("eval.success_rate", "Evaluation success rate (band: 95% Wilson interval)",
              "success rate", unit_range=True, episodes_key="eval.episodes"),
    ChartSpec("eval.mean_score", "Evaluation mean score", "mean score", unit_range=True),
    ChartSpec("train.success_rate", "Training rollout success rate (band: 95% Wilson interval)",
              "success rate", unit_range=True, episodes_key="train.episodes"),
    ChartSpec("groups.kept", "GRPO groups kept", "groups kept"),
    ChartSpec("cycle.seconds", "Wall time per cycle", "wall minutes", scale=1 / 60),
)  # fmt: skip
"""The curves a run page leads with (issue 38: success with its interval, score, kept groups,
wall minutes); every other numeric metric follows with its key as its label."""


@dataclass(frozen=True)
class Tick:
    """One labelled tick of an axis, at a position in SVG coordinates."""

    position: float
    """Where the tick sits along its axis, in SVG coordinates."""
    label: str
    """The value written beside it."""


@dataclass(frozen=True)
class Point:
    """One drawn value: SVG coordinates and the hover text."""

    x: float
    """Horizontal SVG coordinate."""
    y: float
    """Vertical SVG coordinate."""
    text: str
    """Hover text: run, cycle, value and interval."""


@dataclass(frozen=True)
class Series:
    """One run's curve on a chart."""

    run: str
    """The run's folder name."""
    colour: str
    """Its line colour (the same on every chart of a page)."""
    line: str
    """SVG ``polyline`` points."""
    band: str
    """SVG ``polygon`` points of the interval band ("" when the chart has none)."""
    points: list[Point]
    """Each drawn value, for markers and hover text."""


@dataclass(frozen=True)
class Chart:
    """One metric over cycles for one or more runs."""

    key: str
    """The ``metrics.jsonl`` key drawn."""
    title: str
    """The chart's caption."""
    x_label: str
    """The x axis title."""
    y_label: str
    """The y axis title."""
    x_ticks: list[Tick]
    """Labelled cycles along the x axis."""
    y_ticks: list[Tick]
    """Labelled values along the y axis."""
    series: list[Series]
    """One curve per run, in the order the runs were given."""
    width: int = WIDTH
    """SVG width."""
    height: int = HEIGHT
    """SVG height."""

    @property
    def plot_left(self) -> int:
        """Left edge of the plot area (the y axis)."""
        return LEFT

    @property
    def plot_bottom(self) -> int:
        """Bottom edge of the plot area (the x axis)."""
        return self.height - BOTTOM

    @property
    def plot_right(self) -> int:
        """Right edge of the plot area."""
        return self.width - RIGHT


@dataclass(frozen=True)
class _Value:
    """One cycle's value of a metric, with its interval when it has one."""

    cycle: int
    value: float
    low: float | None
    high: float | None


LARGEST = 1e12
"""Values beyond this magnitude are not drawn (no metric of a run gets there; float spans would
lose their precision)."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and abs(value) < LARGEST else None


def _cycle(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 10**6:
        return None
    return value


def _values(rows: Sequence[dict[str, Any]], spec: ChartSpec) -> list[_Value]:
    found = []
    for row in rows:
        cycle, value = _cycle(row.get("cycle")), _number(row.get(spec.key))
        if cycle is None or value is None:
            continue
        low = high = None
        episodes = _number(row.get(spec.episodes_key)) if spec.episodes_key else None
        if episodes is not None and episodes >= 1 and 0.0 <= value <= 1.0:
            low, high = wilson_interval(round(value * episodes), int(episodes))
        found.append(_Value(cycle, value * spec.scale, low, high))
    return found


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    return [low + (high - low) * i / (count - 1) for i in range(count)]


def _label(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"


def build_chart(spec: ChartSpec, runs: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> Chart:
    """Return ``spec``'s chart over ``runs`` (name, metrics rows), all on the same axes."""
    values = [(name, _values(rows, spec)) for name, rows in runs]
    every = [v for _, vs in values for v in vs]
    cycles = [v.cycle for v in every] or [0]
    x_low, x_high = min(cycles), max(max(cycles), min(cycles) + 1)
    ys = [v.value for v in every] or [0.0]
    # A rate's axis is [0, 1], widened only for a value outside it (an edited file).
    y_low, y_high = min(0.0, *ys), max(1.0 if spec.unit_range else 0.0, *ys)
    y_high = y_high if y_high > y_low else y_low + 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x_of(cycle: int) -> float:
        return LEFT + (cycle - x_low) / (x_high - x_low) * plot_w

    def y_of(value: float) -> float:
        return TOP + (1 - (value - y_low) / (y_high - y_low)) * plot_h

    series = []
    for index, (name, vs) in enumerate(values):
        line = " ".join(f"{x_of(v.cycle):.1f},{y_of(v.value):.1f}" for v in vs)
        banded = [v for v in vs if v.low is not None and v.high is not None]
        band = ""
        if banded:
            upper = [f"{x_of(v.cycle):.1f},{y_of(v.high):.1f}" for v in banded]
            lower = [f"{x_of(v.cycle):.1f},{y_of(v.low):.1f}" for v in reversed(banded)]
            band = " ".join(upper + lower)
        points = [Point(x_of(v.cycle), y_of(v.value), _hover(name, spec, v)) for v in vs]
        series.append(Series(name, COLOURS[index % len(COLOURS)], line, band, points))
    whole_cycles = range(x_low, x_high + 1)
    stride = max(1, math.ceil(len(whole_cycles) / 10))
    return Chart(
        key=spec.key,
        title=spec.title,
        x_label="cycle",
        y_label=spec.y_label,
        x_ticks=[Tick(x_of(c), str(c)) for c in whole_cycles[::stride]],
        y_ticks=[Tick(y_of(v), _label(v)) for v in _ticks(y_low, y_high)],
        series=series,
    )


def _hover(run: str, spec: ChartSpec, value: _Value) -> str:
    text = f"{run}, cycle {value.cycle}: {spec.key} = {value.value:.3f}"
    if value.low is not None and value.high is not None:
        text += f" (95% interval {value.low:.2f}-{value.high:.2f})"
    return text


def run_charts(runs: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> list[Chart]:
    """Return the run page's charts: the main curves first, then every other numeric metric.

    A chart appears only when some run has a value for it.
    """
    main_keys = {spec.key for spec in MAIN_CHARTS}
    counts = {spec.episodes_key for spec in MAIN_CHARTS if spec.episodes_key}
    other = sorted(
        {
            key
            for _, rows in runs
            for row in rows
            for key, value in row.items()
            if _number(value) is not None and key not in main_keys | counts | {"cycle"}
        }
    )
    specs = [*MAIN_CHARTS, *(ChartSpec(key, key, key) for key in other)]
    charts = [build_chart(spec, runs) for spec in specs]
    return [chart for chart in charts if any(s.points for s in chart.series)]
