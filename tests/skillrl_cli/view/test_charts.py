"""The run page's learning curves: cycles on x, the success rate's Wilson band, shared axes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillrl_cli.view.charts import HEIGHT, LEFT, TOP, WIDTH, ChartSpec, build_chart, run_charts
from trainers.common.episode_metrics import wilson_interval

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
    assert [t.label for t in chart.y_ticks] == ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]


def test_two_runs_share_one_cycle_axis():
    short = [{"cycle": 0, "eval.success_rate": 0.2, "eval.episodes": 5}]
    long = [{"cycle": c, "eval.success_rate": 0.2, "eval.episodes": 5} for c in range(5)]
    first, second = build_chart(SUCCESS, [("short", short), ("long", long)]).series
    assert _xs(first.line) == pytest.approx([_xs(second.line)[0]])
    assert first.colour != second.colour


def test_every_chart_of_a_page_spans_the_same_cycles():
    # Evaluated every second cycle, trained every cycle but the first: one x axis, 0 to 4.
    rows = [{"cycle": c, "train.success_rate": 0.5} if c else {"cycle": 0} for c in range(5)]
    for row in rows[::2]:
        row.update({"eval.success_rate": 0.4, "eval.episodes": 10})
    charts = run_charts([("r", rows)])
    every = [*charts.main, *charts.more]
    assert len(every) >= 2
    for chart in every:
        assert [t.label for t in chart.x_ticks] == ["0", "1", "2", "3", "4"], chart.key
    training = next(c for c in every if c.key == "train.success_rate")
    assert _xs(training.series[0].line)[0] > LEFT  # its first point is cycle 1, not the edge


def test_a_chart_appears_only_for_metrics_some_run_has():
    charts = run_charts([("r", [{"cycle": 1, "groups.kept": 2, "bank.snapshot": "s",
                                 "update.skipped": True}])])  # fmt: skip
    assert [c.key for c in charts.more] == ["groups.kept"] and charts.main == []
    assert len(run_charts([("r", [])])) == 0


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
    drawn = run_charts([("r", rows)])
    for chart in drawn.main + drawn.more:
        for series in chart.series:
            for text in (series.line, series.band):
                for x, y in ((float(a), float(b)) for a, b in (p.split(",") for p in text.split())):
                    assert math.isfinite(x) and math.isfinite(y)
                    assert LEFT - 0.1 <= x <= WIDTH and 0 <= y <= HEIGHT


def test_the_charts_that_matter_lead_and_the_rest_are_folded():
    row = {"cycle": 1, "eval.success_rate": 0.5, "eval.episodes": 4, "update.loss": 0.2,
           "update.kl": 0.01, "update.tokens_per_second": 900.0, "bank.size": 12,
           "sensitivity.changed_share": 0.3, "bank_worth.won": 2, "groups.kept": 3,
           "update.grad_norm": 1.5, "cycle.seconds": 60.0}  # fmt: skip
    charts = run_charts([("r", [{**row, "cycle": 0}, row])])
    assert [c.key for c in charts.main] == [
        "eval.success_rate", "update.loss", "update.kl", "update.tokens_per_second",
        "bank.size", "sensitivity.changed_share", "bank_worth.won",
    ]  # fmt: skip
    assert [c.key for c in charts.more] == ["groups.kept", "cycle.seconds", "update.grad_norm"]


def test_one_cycle_is_drawn_at_that_cycle_alone_with_its_interval_as_a_bar():
    chart = build_chart(SUCCESS, [("r", [{"cycle": 3, "eval.success_rate": 0.5,
                                          "eval.episodes": 10}])])  # fmt: skip
    assert [t.label for t in chart.x_ticks] == ["3"]  # no phantom cycle 4
    (series,) = chart.series
    (point,) = series.points
    assert point.x == pytest.approx((LEFT + WIDTH - 12) / 2)
    xs, ys = _xs(series.band), _ys(series.band)
    assert max(xs) - min(xs) >= 8 and max(ys) - min(ys) > 20  # a visible bar, not a line


@pytest.mark.parametrize("top", [0.013, 0.1, 0.9, 3.0, 7.3, 42.0, 12345.0, 2e-5, 1e9])
def test_tick_labels_are_never_repeated_and_stay_short(top):
    rows = [{"cycle": 0, "m": 0.0}, {"cycle": 1, "m": top}]
    chart = build_chart(ChartSpec("m", "m", "m"), [("r", rows)])
    labels = [t.label for t in chart.y_ticks]
    assert len(labels) == len(set(labels)) >= 3
    assert all(len(label) <= 7 for label in labels)
    assert chart.y_ticks[-1].position <= min(p.y for p in chart.series[0].points) + 0.1


def test_an_sft_run_counts_rounds_on_its_x_axis():
    charts = run_charts([("s", [{"round": 0, "train.loss": 1.0}, {"round": 1, "train.loss": 0.5}])],
                        x_key="round")  # fmt: skip
    (chart,) = charts.more
    assert chart.key == "train.loss" and chart.x_label == "round"
    assert [t.label for t in chart.x_ticks] == ["0", "1"]
