"""The record of what an update trained on: advantages with their parts, turns left out."""

from __future__ import annotations

import pytest

from skillrl_core.records import EpisodeRecord, TurnRecord
from trainers.update.advantages import compute_advantages
from trainers.update.batching import turn_left_out
from trainers.update.update_record import UpdateRecord, update_record


def _turn(turn: int, observation: str, **kwargs) -> TurnRecord:
    return TurnRecord(turn=turn, observation=observation, available_actions=[], action="a",
                      action_valid=True, reward=0.0, prompt_token_ids=[1],
                      completion_token_ids=[2], **kwargs)  # fmt: skip


def _episode(turns: list[TurnRecord]) -> EpisodeRecord:
    return EpisodeRecord("webshop", "g", "buy", "c", turns=turns, group_id="grp")


def test_the_record_holds_each_part_and_adds_up_as_gigpo_eq_8():
    won = _episode([_turn(0, "search"), _turn(1, "results")])
    lost = _episode([_turn(0, "search"), _turn(1, "results", action_substituted=True)])
    rewards = [[0.0, 1.0], [0.0, 0.0]]
    advantages = compute_advantages([won, lost], rewards, gamma=1.0, step_weight=0.5)
    left_out = [
        [turn_left_out(t, a, keep_zero_advantage=False) for t, a in zip(e.turns, row, strict=True)]
        for e, row in zip([won, lost], advantages.advantages, strict=True)
    ]
    record = update_record([won, lost], rewards, advantages, left_out, step_weight=0.5)
    first, second = record.episodes
    assert first.episode_id == won.episode_id and first.group == "grp"
    assert (first.episode_return, second.episode_return) == (1.0, 0.0)
    assert first.episode_advantage == pytest.approx(1.0)
    assert second.episode_advantage == pytest.approx(-1.0)
    assert [t.reward for t in first.turns] == [0.0, 1.0]
    for episode in record.episodes:
        for turn in episode.turns:
            expected = episode.episode_advantage + 0.5 * turn.step_advantage
            assert turn.advantage == pytest.approx(expected)
    assert first.turns[1].left_out == ""
    assert second.turns[1].left_out == "action substituted: its tokens did not earn its reward"
    assert UpdateRecord.from_dict(record.to_dict()) == record


def test_why_a_turn_is_left_out_of_the_loss():
    assert turn_left_out(_turn(0, "p"), 0.3, keep_zero_advantage=False) == ""
    assert "zero advantage" in turn_left_out(_turn(0, "p"), 0.0, keep_zero_advantage=False)
    assert turn_left_out(_turn(0, "p"), 0.0, keep_zero_advantage=True) == ""  # the KL term
    scripted = _turn(0, "p")
    scripted.completion_token_ids = None
    assert "no recorded tokens" in turn_left_out(scripted, 1.0, keep_zero_advantage=True)


def test_the_learning_curve_draws_the_interval_band_and_wall_minutes(tmp_path, monkeypatch):
    import matplotlib.axes

    from trainers.cycle.run_files import plot_learning_curve

    drawn = {}
    band, note = matplotlib.axes.Axes.fill_between, matplotlib.axes.Axes.annotate
    monkeypatch.setattr(matplotlib.axes.Axes, "fill_between",
                        lambda self, x, low, high, **k: drawn.setdefault("band", (x, low, high))
                        or band(self, x, low, high, **k))  # fmt: skip
    monkeypatch.setattr(matplotlib.axes.Axes, "annotate",
                        lambda self, text, xy, **k: drawn.setdefault("notes", []).append(text)
                        or note(self, text, xy, **k))  # fmt: skip
    history = [
        {"cycle": 0, "cycle.seconds": 600, "eval.success_rate": 0.5, "eval.episodes": 100},
        {"cycle": 1, "cycle.seconds": 300},  # not evaluated: no point, but its minutes count
        {"cycle": 2, "cycle.seconds": 300, "eval.success_rate": 0.6, "eval.episodes": 100},
    ]
    plot_learning_curve(history, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 0
    cycles, low, high = drawn["band"]
    assert list(cycles) == [0, 2] and low[0] < 0.5 < high[0] and low[1] < 0.6 < high[1]
    assert drawn["notes"] == ["10 min", "20 min"]


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe\x00binary", b"[1, 2]", b'{"step_weight": 0.5, "episodes": [[1]]}',
     b'{"episodes": "no"}'],
)  # fmt: skip
@pytest.mark.parametrize("name", ["advantages.json", "rollout.json"])
def test_a_damaged_cycle_file_is_a_checkpoint_error_naming_it(tmp_path, content, name):
    from skillrl_core.errors import CheckpointError
    from trainers.cycle.run_files import RunFiles

    files = RunFiles(tmp_path / "run")
    files.cycle_dir(1).mkdir(parents=True)
    (files.cycle_dir(1) / name).write_bytes(content)
    load = files.load_update_record if name == "advantages.json" else files.load_rollout
    with pytest.raises(CheckpointError, match=name):
        load(1)


@pytest.mark.parametrize("cycles", [[0], [0, 1], [0, 3, 6], list(range(0, 40, 3))])
def test_the_learning_curve_has_whole_cycle_ticks_labels_and_success_on_top(cycles):
    import matplotlib.pyplot as plt

    from trainers.cycle.run_files import learning_curve_figure

    history = [
        {"cycle": c, "eval.success_rate": 1.0, "eval.mean_score": 1.0, "eval.episodes": 10}
        for c in cycles
    ]
    figure = learning_curve_figure(history, "run")
    try:
        axis = figure.axes[0]
        low, high = axis.get_xlim()
        ticks = [t for t in axis.get_xticks() if low <= t <= high]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
        assert axis.get_ylabel() and axis.get_xlabel().startswith("cycle")
        assert axis.get_ylim()[1] > 1.0  # a point at 1.0 is drawn whole
        lines = {line.get_label(): line for line in axis.get_lines()}
        assert lines["success"].get_zorder() > lines["score"].get_zorder()
        assert not lines["success"].get_clip_on() and not lines["score"].get_clip_on()
    finally:
        plt.close(figure)
