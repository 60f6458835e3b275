"""The run page's learning curves: cycles on x, the success rate's Wilson band, shared axes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillrl_cli.view.charts import HEIGHT, LEFT, TOP, WIDTH, ChartSpec, build_chart, run_charts
from trainers.episode_metrics import wilson_interval

SUCCESS = ChartSpec("eval.success_rate", "success", "success rate", unit_range=True,
                    episodes_key="eval.episodes")  # fmt: skip


def _ys(points: str) -> list[float]:
    return [float(p.split(",")[1]) for p in points.split()]


def _xs(points: str) -> list[float]:
    return [float(p.split(",")[0]) for p in points.split()]


def test_the_band_is_the_wilson_interval_of_each_evaluated_cycle():
    rows = [{"cycle": 0, "eval.success_rate": 0.5, "eval.episodes": 20},
            {"cycle": 1, "eval.success_rate": 0.9, "eval.episodes": 20}]  # fmt: skip
    (series,) = build_chart(SUCCESS, [("r", rows)]).series
    plot_h = HEIGHT - TOP - 40

    def value_of(y: float) -> float:
        return 1 - (y - TOP) / plot_h

    band = _ys(series.band)  # upper edge left to right, then lower edge right to left
    low0, high0 = wilson_interval(10, 20)
    low1, high1 = wilson_interval(18, 20)
    expected = [high0, high1, low1, low0]
    assert [value_of(y) for y in band] == pytest.approx(expected, abs=0.01)
    assert [value_of(y) for y in _ys(series.line)] == pytest.approx([0.5, 0.9], abs=0.01)


def test_cycles_without_an_evaluation_are_gaps_on_a_cycle_axis_not_squeezed_out():
    rows = [{"cycle": 0, "eval.success_rate": 0.1, "eval.episodes": 10}, {"cycle": 1},
            {"cycle": 2}, {"cycle": 4, "eval.success_rate": 0.3, "eval.episodes": 10}]  # fmt: skip
    chart = build_chart(SUCCESS, [("r", rows)])
    (series,) = chart.series
    assert len(series.points) == 2
    assert [t.label for t in chart.x_ticks] == ["0", "1", "2", "3", "4"]
    assert _xs(series.line) == pytest.approx([LEFT, WIDTH - 12])
    assert chart.x_label == "cycle" and chart.y_label == "success rate"
    assert [t.label for t in chart.y_ticks] == ["0", "0.25", "0.50", "0.75", "1"]


def test_two_runs_share_one_cycle_axis():
    short = [{"cycle": 0, "eval.success_rate": 0.2, "eval.episodes": 5}]
    long = [{"cycle": c, "eval.success_rate": 0.2, "eval.episodes": 5} for c in range(5)]
    first, second = build_chart(SUCCESS, [("short", short), ("long", long)]).series
    assert _xs(first.line) == pytest.approx([_xs(second.line)[0]])
    assert first.colour != second.colour


def test_a_chart_appears_only_for_metrics_some_run_has():
    charts = run_charts([("r", [{"cycle": 1, "groups.kept": 2, "bank.snapshot": "s",
                                 "update.skipped": True}])])  # fmt: skip
    assert [c.key for c in charts] == ["groups.kept"]
    assert run_charts([("r", [])]) == []


NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**6), 10**6),
    st.text(max_size=5),
    st.booleans(),
    st.none(),
)
ROWS = st.lists(
    st.fixed_dictionaries(
        {"cycle": st.one_of(st.integers(0, 50), st.floats(allow_nan=True), st.text(max_size=3))},
        optional={
            "eval.success_rate": NUMBERS,
            "eval.episodes": NUMBERS,
            "cycle.seconds": NUMBERS,
            "other": NUMBERS,
        },  # fmt: skip
    ),
    max_size=12,
)


@settings(max_examples=80, deadline=None)
@given(rows=ROWS)
def test_any_metrics_file_draws_inside_the_chart_or_not_at_all(rows):
    # metrics.jsonl of a run in progress, or one a person edited: nothing in it may break the
    # page or draw outside the plot.
    for chart in run_charts([("r", rows)]):
        for series in chart.series:
            for text in (series.line, series.band):
                for x, y in ((float(a), float(b)) for a, b in (p.split(",") for p in text.split())):
                    assert math.isfinite(x) and math.isfinite(y)
                    assert LEFT - 0.1 <= x <= WIDTH and 0 <= y <= HEIGHT
