"""Learning curves of training runs as SVG geometry: axes with ticks, lines, interval bands.

Pure: rows of ``metrics.jsonl`` in, typed charts out; the run page's template only draws them.
The x axis is the cycle (a run with ``--eval-every`` has evaluation points on some cycles only),
or the round of an ``sft`` run.
A success rate with its episode count beside it (``eval.success_rate`` and ``eval.episodes``)
gets its 95% Wilson interval as a shaded band, as ``skillrl eval`` reports it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainers.common.episode_metrics import wilson_interval
from trainers.cycle.cycle_metrics import (
    BANK_SIZE,
    BANK_WORTH_LOST,
    BANK_WORTH_P_VALUE,
    BANK_WORTH_WON,
    CYCLE_SECONDS,
    EVAL_EPISODES,
    EVAL_MEAN_SCORE,
    EVAL_SUCCESS_RATE,
    GROUPS_KEPT,
    SENSITIVITY_CHANGED_SHARE,
    TRAIN_EPISODES,
    TRAIN_SUCCESS_RATE,
    UPDATE_CLIP_HIGH_FRACTION,
    UPDATE_KL,
    UPDATE_LOSS,
    UPDATE_TOKENS_PER_SECOND,
)

WIDTH, HEIGHT = 1000, 240
"""Size of one chart's SVG, axes and labels included (drawn the page's full width)."""
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 40
"""Margins around the plot area: room for the tick labels and the axis titles."""
BAR = 5.0
"""Half the width of the bar drawn for an interval of a single point."""
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
    ChartSpec(EVAL_SUCCESS_RATE, "Evaluation success rate (band: 95% Wilson interval)",
              "success rate", unit_range=True, episodes_key=EVAL_EPISODES),
    ChartSpec(EVAL_MEAN_SCORE, "Evaluation mean score", "mean score", unit_range=True),
    ChartSpec(TRAIN_SUCCESS_RATE, "Training rollout success rate (band: 95% Wilson interval)",
              "success rate", unit_range=True, episodes_key=TRAIN_EPISODES),
    ChartSpec(UPDATE_LOSS, "Update loss", "loss"),
    ChartSpec(UPDATE_KL, "KL divergence to the reference model", "KL"),
    ChartSpec(UPDATE_CLIP_HIGH_FRACTION, "Share of tokens clipped above (ratio > 1 + epsilon)",
              "clipped share"),
    ChartSpec(UPDATE_TOKENS_PER_SECOND, "Update throughput", "tokens / s"),
    ChartSpec(BANK_SIZE, "Skill bank size (end of cycle)", "entries"),
    ChartSpec(SENSITIVITY_CHANGED_SHARE,
              "Skill sensitivity: open turns whose action a placebo bank changes", "share changed",
              unit_range=True),
    ChartSpec(BANK_WORTH_WON, "Evaluation goals solved only with the evolved bank "
              "(vs the cycle-0 bank)", "goals won"),
    ChartSpec(BANK_WORTH_LOST, "Evaluation goals solved only with the cycle-0 bank",
              "goals lost"),
    ChartSpec(BANK_WORTH_P_VALUE, "Evolved vs cycle-0 bank: exact McNemar p", "p",
              unit_range=True),
)  # fmt: skip
"""The curves a run page leads with (issue 50: success with its interval, score, training
success, loss, KL and clipping, throughput, bank size, skill sensitivity, what evolving the
bank was worth); a chart shows only when a run has its metric."""

FOLDED_FIRST: tuple[ChartSpec, ...] = (
    ChartSpec(GROUPS_KEPT, "GRPO groups kept", "groups kept"),
    ChartSpec(CYCLE_SECONDS, "Wall time per cycle", "wall minutes", scale=1 / 60),
)  # fmt: skip
"""Folded with the rest but labelled (wall minutes): every other numeric metric follows them,
its key as its label."""


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


def _values(rows: Sequence[dict[str, Any]], spec: ChartSpec, x_key: str) -> list[_Value]:
    found = []
    for row in rows:
        cycle, value = _cycle(row.get(x_key)), _number(row.get(spec.key))
        if cycle is None or value is None:
            continue
        low = high = None
        episodes = _number(row.get(spec.episodes_key)) if spec.episodes_key else None
        if episodes is not None and episodes >= 1 and 0.0 <= value <= 1.0:
            low, high = wilson_interval(round(value * episodes), int(episodes))
        found.append(_Value(cycle, value * spec.scale, low, high))
    return found


def _step(low: float, high: float, count: int = 5) -> float:
    """Return a round tick step (1, 2 or 5 times a power of ten) for about ``count`` ticks."""
    raw = (high - low) / (count - 1)
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw * 0.75)


def _labels(values: list[float], step: float) -> list[str]:
    """Return tick labels as short as can be while no two are alike (never 0.01 twice).

    The decimals follow the step; large values are written in thousands or more (``12k``,
    ``3M``) and tiny steps in scientific notation, so a label fits beside the axis.
    """
    biggest = max(abs(v) for v in values)
    if biggest >= 1e4:
        unit, suffix = next((u, x) for u, x in ((1e9, "G"), (1e6, "M"), (1e3, "k"))
                            if biggest >= 10 * u)  # fmt: skip
        decimals = max(0, -math.floor(math.log10(step / unit) + 1e-9))
        return [f"{v / unit:.{decimals}f}{suffix}" if v else "0" for v in values]
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    if decimals > 4:
        return [f"{v:.1e}" if v else "0" for v in values]
    return [f"{v:.{decimals}f}" for v in values]


def build_chart(
    spec: ChartSpec,
    runs: Sequence[tuple[str, Sequence[dict[str, Any]]]],
    x_key: str = "cycle",
    x_range: tuple[int, int] | None = None,
) -> Chart:
    """Return ``spec``'s chart over ``runs`` (name, metrics rows), all on the same axes.

    ``x_key`` is what the x axis counts: ``cycle`` (``train``) or ``round`` (``sft``).
    ``x_range`` (first, last) is the x axis; by default, the cycles this metric has (a page
    passes its runs' whole range, so a metric measured every second cycle lines up with the
    others).

    The y axis runs between round ticks; a chart of one cycle has that cycle alone, in the
    middle (no second cycle is invented), and an interval of one point is drawn as a bar.
    """
    values = [(name, _values(rows, spec, x_key)) for name, rows in runs]
    every = [v for _, vs in values for v in vs]
    cycles = [v.cycle for v in every] or [0]
    x_low, x_high = x_range or (min(cycles), max(cycles))
    ys = [v.value for v in every] or [0.0]
    ys += [b for v in every for b in (v.low, v.high) if b is not None]
    # A rate's axis is [0, 1], widened only for a value outside it (an edited file).
    y_low, y_high = min(0.0, *ys), max(1.0 if spec.unit_range else 0.0, *ys)
    y_high = y_high if y_high > y_low else y_low + 1
    step = _step(y_low, y_high)
    y_low, y_high = math.floor(y_low / step + 1e-9) * step, math.ceil(y_high / step - 1e-9) * step
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x_of(cycle: int) -> float:
        if x_high == x_low:
            return LEFT + plot_w / 2
        return LEFT + (cycle - x_low) / (x_high - x_low) * plot_w

    def y_of(value: float) -> float:
        return TOP + (1 - (value - y_low) / (y_high - y_low)) * plot_h

    series = []
    for index, (name, vs) in enumerate(values):
        line = " ".join(f"{x_of(v.cycle):.1f},{y_of(v.value):.1f}" for v in vs)
        banded = [v for v in vs if v.low is not None and v.high is not None]
        band = ""
        if len(banded) == 1:  # a band one point wide has no area: draw it as a bar
            (v,) = banded
            left = max(LEFT, x_of(v.cycle) - BAR)
            right = min(WIDTH - RIGHT, x_of(v.cycle) + BAR)
            corners = ((left, v.high), (right, v.high), (right, v.low), (left, v.low))
            band = " ".join(f"{x:.1f},{y_of(y):.1f}" for x, y in corners)
        elif banded:
            upper = [f"{x_of(v.cycle):.1f},{y_of(v.high):.1f}" for v in banded]
            lower = [f"{x_of(v.cycle):.1f},{y_of(v.low):.1f}" for v in reversed(banded)]
            band = " ".join(upper + lower)
        points = [Point(x_of(v.cycle), y_of(v.value), _hover(name, spec, v, x_key)) for v in vs]
        series.append(Series(name, COLOURS[index % len(COLOURS)], line, band, points))
    whole_cycles = range(x_low, x_high + 1)
    stride = max(1, math.ceil(len(whole_cycles) / 10))
    y_values = [y_low + step * i for i in range(round((y_high - y_low) / step) + 1)]
    return Chart(
        key=spec.key,
        title=spec.title,
        x_label=x_key,
        y_label=spec.y_label,
        x_ticks=[Tick(x_of(c), str(c)) for c in whole_cycles[::stride]],
        y_ticks=[Tick(y_of(v), t) for v, t in zip(y_values, _labels(y_values, step), strict=True)],
        series=series,
    )


def _hover(run: str, spec: ChartSpec, value: _Value, x_key: str) -> str:
    text = f"{run}, {x_key} {value.cycle}: {spec.key} = {value.value:.3f}"
    if value.low is not None and value.high is not None:
        text += f" (95% interval {value.low:.2f}-{value.high:.2f})"
    return text


@dataclass(frozen=True)
class RunCharts:
    """A run page's charts: the ones that matter first, and the rest (folded on the page)."""

    main: list[Chart]
    """:data:`MAIN_CHARTS` that some run has, in that order."""
    more: list[Chart]
    """Every other numeric metric some run has: :data:`FOLDED_FIRST`, then by key."""

    def __len__(self) -> int:
        return len(self.main) + len(self.more)


def run_charts(
    runs: Sequence[tuple[str, Sequence[dict[str, Any]]]], x_key: str = "cycle"
) -> RunCharts:
    """Return the run page's charts: the main curves, then every other numeric metric.

    A chart appears only when some run has a value for it; ``x_key`` as in :func:`build_chart`.
    """
    named = {spec.key for spec in (*MAIN_CHARTS, *FOLDED_FIRST)}
    counts = {spec.episodes_key for spec in MAIN_CHARTS if spec.episodes_key}
    other = sorted(
        {
            key
            for _, rows in runs
            for row in rows
            for key, value in row.items()
            if _number(value) is not None and key not in named | counts | {x_key}
        }
    )
    more = [*FOLDED_FIRST, *(ChartSpec(key, key, key) for key in other)]
    every_x = [x for _, rows in runs for row in rows if (x := _cycle(row.get(x_key))) is not None]
    x_range = (min(every_x), max(every_x)) if every_x else None

    def drawn(specs: Sequence[ChartSpec]) -> list[Chart]:
        charts = [build_chart(spec, runs, x_key, x_range) for spec in specs]
        return [chart for chart in charts if any(s.points for s in chart.series)]

    return RunCharts(main=drawn(MAIN_CHARTS), more=drawn(more))
