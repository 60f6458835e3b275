"""A run's progress shows as rich bars on a terminal and as plain lines on stderr anywhere else:
a piped or nohup'd `skillrl sft` had printed nothing for an hour."""

from __future__ import annotations

import io

from rich.console import Console

from skillrl_cli.train_session import PhaseBars, rollout_text
from trainers.common.policy_rollouts import RolloutProgress


def bars(terminal: bool, interval: float) -> tuple[PhaseBars, io.StringIO, io.StringIO]:
    screen, lines = io.StringIO(), io.StringIO()
    console = Console(file=screen, force_terminal=terminal, width=100)
    progress = PhaseBars(console, "cold start (phases)", 2, lines=Console(file=lines, width=200))
    progress.interval = interval
    return progress, screen, lines


def play(progress: PhaseBars) -> None:
    with progress:
        progress.phase("behaviour cloning: gathering examples")
        show = progress.show("  episodes")
        for done in range(1, 5):
            show(done, 4)
        progress.advance()
        progress.phase("behaviour cloning: fine-tuning")
        progress.show("  optimizer steps")(3, 3)
        progress.advance()


def test_off_a_terminal_every_phase_and_each_interval_prints_a_line():
    progress, screen, lines = bars(terminal=False, interval=0.0)
    play(progress)
    out = lines.getvalue().splitlines()
    assert out[0].startswith("[0/2 phases, 0:00:0") and out[0].endswith("gathering examples")
    assert [line.split(",")[0] for line in out[1:5]] == [f"episodes {d}/4" for d in range(1, 5)]
    assert "/s, " in out[1] and out[1].endswith(" left")  # a rate and time left
    assert out[5].startswith("[1/2 phases") and out[5].endswith("fine-tuning")
    assert out[6].startswith("optimizer steps 3/3")
    assert screen.getvalue() == ""  # no bar redraws into a log


def test_between_intervals_only_the_phase_and_its_end_print():
    progress, _, lines = bars(terminal=False, interval=3600.0)
    play(progress)
    out = [line.split(",")[0] for line in lines.getvalue().splitlines()]
    assert out[1:2] == ["episodes 4/4"] and out[3:] == ["optimizer steps 3/3"]


def test_on_a_terminal_the_bars_draw_and_no_line_prints():
    progress, screen, lines = bars(terminal=True, interval=0.0)
    play(progress)
    assert lines.getvalue() == "" and "fine-tuning" in screen.getvalue()


def rollout(episodes_done: int, turns: int, spent: int, seconds: float) -> RolloutProgress:
    return RolloutProgress(episodes_done, 4, turns, 40, spent, seconds)


def test_a_rollout_shows_episodes_turns_rate_and_time_left():
    assert rollout_text(rollout(0, 0, 0, 0.0)) == "episodes 0/4, turns 0"
    assert rollout_text(rollout(1, 20, 26, 10.0)) == (
        "episodes 1/4, turns 20, 2.00 turns/s, at most 0:00:07 left"
    )
    assert rollout_text(rollout(4, 30, 40, 15.0)) == "episodes 4/4, turns 30, 2.00 turns/s"


def test_a_piped_rollout_prints_lines_within_the_phase_and_at_its_end():
    progress, screen, lines = bars(terminal=False, interval=3600.0)
    with progress:
        progress.phase("cycle 1: rolling out groups")
        show = progress.show_rollout("  rollout:")
        for turns in range(1, 30):
            show(rollout(0, turns, turns, turns / 2))
        show(rollout(4, 30, 40, 15.0))
    out = lines.getvalue().splitlines()
    assert out[1:] == ["rollout: episodes 4/4, turns 30, 2.00 turns/s"]  # interval: only the end
    progress, screen, lines = bars(terminal=False, interval=0.0)
    with progress:
        progress.show_rollout("  rollout:")(rollout(1, 20, 26, 10.0))
    assert lines.getvalue().splitlines() == [
        "rollout: episodes 1/4, turns 20, 2.00 turns/s, at most 0:00:07 left"
    ]
    assert screen.getvalue() == ""


def test_one_rollout_callback_names_what_each_phase_plays():
    progress, _screen, lines = bars(terminal=False, interval=0.0)
    with progress:
        show = progress.show_rollout()
        show(rollout(4, 30, 30, 15.0))
        progress.rollout_label = "  goals:"  # an evaluation phase starts
        show(rollout(2, 10, 10, 5.0))
    out = lines.getvalue().splitlines()
    assert out[0].startswith("rollout: episodes 4/4") and out[1].startswith("goals: episodes 2/4")


def test_on_a_terminal_the_rollout_bar_carries_the_turns():
    progress, screen, lines = bars(terminal=True, interval=0.0)
    with progress:
        progress.show_rollout("  rollout:")(rollout(1, 20, 26, 10.0))
    assert lines.getvalue() == "" and "turns 20, 2.00 turns/s" in screen.getvalue()


class FakeTrainer:
    on_progress = on_turns = None


def test_an_update_counts_its_turns_inside_each_optimizer_step():
    progress, screen, lines = bars(terminal=False, interval=0.0)
    trainer = FakeTrainer()
    with progress:
        progress.phase("cycle 1: RFT update")
        # as the library's TrainWatch hands them to the GRPO trainer
        trainer.on_progress, trainer.on_turns = progress.optimizer_stepped, progress.turns_trained
        trainer.on_turns(2, 8)
        trainer.on_turns(4, 8)
        trainer.on_progress(1, 2)
        trainer.on_turns(6, 8)
        trainer.on_turns(3, 8)  # the next update starts: no step of it taken yet
    out = [line.split(", ")[0:2] for line in lines.getvalue().splitlines()[1:]]
    assert [o[0] for o in out] == [f"turns trained {d}/8" for d in (2, 4)] + [
        "turns trained",
        "turns trained 3/8",
    ]
    assert out[2][1] == "optimizer steps 1/2 6/8"
    assert screen.getvalue() == ""


def test_the_evaluation_phase_says_what_it_plays_besides_the_evaluation_goals():
    from skillrl_cli.train_session import evaluation_words
    from trainers.cycle.config import CycleConfig

    plain = CycleConfig(eval_goals=10)
    assert evaluation_words(plain, 0) == "evaluating 10 test goals"
    recipe = CycleConfig(eval_goals=100, eval_split="eval", test_goals=300,
                         compare_starting_bank=True)  # fmt: skip
    assert "then 300 test goals" in evaluation_words(recipe, 0)
    assert "cycle-0 bank" not in evaluation_words(recipe, 0)  # cycle 0's bank is the start
    later = evaluation_words(recipe, 2)
    assert later.startswith("evaluating 100 eval goals") and "cycle-0 bank" in later
    assert "test goals" not in later


def test_a_run_without_evaluation_goals_says_so_and_shows_no_success():
    from skillrl_cli.train_session import evaluation_words, print_cycle
    from trainers.common.episode_metrics import EpisodeSummary
    from trainers.cycle.config import CycleConfig
    from trainers.cycle.cycle_metrics import CycleMetrics

    assert evaluation_words(CycleConfig(eval_goals=0), 0) == "no evaluation goals (--eval-goals 0)"
    screen = io.StringIO()
    console = Console(file=screen, width=200)
    print_cycle(
        console, CycleMetrics(cycle=0, eval=EpisodeSummary(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0))
    )
    print_cycle(
        console, CycleMetrics(cycle=2, eval=EpisodeSummary(10, 0.3, 0.5, 4.0, 0.0, 9.0, 3.0))
    )
    first, second = screen.getvalue().splitlines()
    assert "no evaluation goals" in first and "success" not in first
    assert "success 0.30" in second
