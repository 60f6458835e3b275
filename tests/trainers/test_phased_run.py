"""The shared driver of resumable runs: order, commits, resumes, and its typed events."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from trainers.cold_start.cold_start import ColdStartPhase, ColdStartState
from trainers.common.phased_run import (
    Phase,
    PhaseEnded,
    PhaseSaved,
    PhaseStarted,
    RunEvents,
    StageStarted,
    drive,
    phase_completed,
)
from trainers.cycle.run_files import CyclePhase, RunState


class Step(Phase):
    A = "a"
    B = "b"
    C = "c"


@dataclass
class Toy:
    stage: int = 0
    phase: str = ""
    commits: list[tuple[int, str]] = field(default_factory=list)

    def completed(self, index, phase):
        return phase_completed(list(Step), self.stage, self.phase, index, phase)

    def finish_phase(self, index, phase):
        self.stage, self.phase = index, phase.value

    def finish_stage(self, index):
        self.stage, self.phase = index + 1, ""


class Stop(Exception):
    pass


def play(state, stop_at=None, stages=2, phases=lambda i: list(Step)):
    ran, seen = [], []
    events = RunEvents()
    for kind in (StageStarted, PhaseStarted, PhaseSaved, PhaseEnded):
        events.on(kind, seen.append)
    if stop_at is not None:

        def stop(event):
            if event == stop_at:
                raise Stop

        events.on(type(stop_at), stop)

    def runner(phase):
        def run(index, st):
            ran.append((index, phase.value))
            events.emit(PhaseSaved(index, phase))

        return run

    drive(
        state,
        range(state.stage, stages),
        phases,
        {phase: runner(phase) for phase in Step},
        commit=lambda st: st.commits.append((st.stage, st.phase)),
        events=events,
    )
    return ran, seen


def test_every_phase_runs_in_order_with_a_commit_after_each_and_after_each_stage():
    state = Toy()
    ran, seen = play(state)
    assert ran == [(0, "a"), (0, "b"), (0, "c"), (1, "a"), (1, "b"), (1, "c")]
    assert state.commits == [(0, "a"), (0, "b"), (0, "c"), (1, "")] + [
        (1, "a"),
        (1, "b"),
        (1, "c"),
        (2, ""),
    ]
    assert seen[:5] == [
        StageStarted(0),
        PhaseStarted(0, Step.A),
        PhaseSaved(0, Step.A),
        PhaseEnded(0, Step.A),
        PhaseStarted(0, Step.B),
    ]


@pytest.mark.parametrize(
    "stop_at",
    [PhaseStarted(1, Step.B), PhaseSaved(1, Step.B), PhaseEnded(0, Step.C), StageStarted(1)],
)
def test_a_run_stopped_anywhere_resumes_at_the_first_uncommitted_phase(stop_at):
    state = Toy()
    with pytest.raises(Stop):
        play(state, stop_at)
    first, _ = play(Toy())
    done = [(index, name) for index, name in first if state.completed(index, Step(name))]
    ran, _ = play(state)
    assert done + ran == first  # nothing twice, nothing skipped


def test_a_stage_may_skip_a_phase_and_keeps_the_order_of_the_others():
    state = Toy()
    ran, _ = play(state, phases=lambda i: [Step.A, Step.C] if i == 0 else list(Step))
    assert ran[:3] == [(0, "a"), (0, "c"), (1, "a")]
    assert not Toy(stage=1, phase="a").completed(1, Step.C)
    assert Toy(stage=1, phase="c").completed(1, Step.B)


def test_events_go_to_their_own_type_only_in_subscription_order():
    events, got = RunEvents(), []
    events.on(PhaseEnded, lambda e: got.append(("first", e))).on(
        PhaseEnded, lambda e: got.append(("second", e))
    )
    events.emit(PhaseStarted(0, Step.A))
    events.emit(PhaseEnded(0, Step.A))
    assert got == [("first", PhaseEnded(0, Step.A)), ("second", PhaseEnded(0, Step.A))]


def test_both_runs_states_record_phases_by_their_names():
    run = RunState()
    run.finish_phase(2, CyclePhase.UPDATE)
    assert (run.cycle, run.phase) == (2, "update") and type(run.phase) is str
    assert run.completed(2, CyclePhase.DISTILL) and not run.completed(2, CyclePhase.EVAL)
    assert RunState.from_dict({"cycle": 2, "phase": "update"}).completed(1, CyclePhase.SAVE)
    cold = ColdStartState()
    cold.finish_phase(0, ColdStartPhase.DATA)
    assert cold.completed(0, ColdStartPhase.DATA) and not cold.completed(0, ColdStartPhase.TRAIN)
    cold.finish_stage(0)
    assert (cold.round, cold.phase) == (1, "") and cold.completed(0, ColdStartPhase.TRAIN)
    assert str(CyclePhase.EVAL) == "eval"
