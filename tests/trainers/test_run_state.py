"""The one run state of both trainers (``state.json``) and the one start or resume of a folder."""

from __future__ import annotations

import json
import re

import pytest

from skillrl_core.errors import CheckpointError
from trainers.cold_start.cold_start import ColdStartPhase, ColdStartState
from trainers.common.run_state import prepare_run_folder, read_run_state
from trainers.cycle.run_files import CyclePhase, RunFiles, RunState

ROW = {"cycle": 1, "eval.success_rate": 0.5}


def test_a_state_survives_its_round_trip_through_a_dict():
    run = RunState(cycle=3, phase="update", goal_cursor=7, history=[ROW], current={"a": 1})
    run.stopped_early_after, run.tested = 2, True
    assert RunState.from_dict(json.loads(json.dumps(run.to_dict()))) == run
    cold = ColdStartState(round=2, phase="data", done=True, history=[{"round": 1}])
    assert ColdStartState.from_dict(json.loads(json.dumps(cold.to_dict()))) == cold


def test_the_stage_is_saved_under_each_trainers_own_key():
    assert RunState(cycle=2).to_dict()["cycle"] == 2
    assert ColdStartState(round=4).to_dict()["round"] == 4
    assert "round" not in RunState().to_dict() and "cycle" not in ColdStartState().to_dict()
    assert "stage" not in RunState().to_dict() and "stage" not in ColdStartState().to_dict()
    assert sorted(ColdStartState().to_dict()) == ["current", "done", "history", "phase", "round"]


def test_both_states_move_their_own_stage_field():
    run, cold = RunState(), ColdStartState()
    run.finish_phase(2, CyclePhase.SAVE)
    run.finish_stage(2)
    cold.finish_phase(1, ColdStartPhase.TRAIN)
    assert (run.cycle, run.stage, run.phase) == (3, 3, "")
    assert (cold.round, cold.stage, cold.phase) == (1, 1, "train")
    assert run.completed(2, CyclePhase.SAVE) and not run.completed(3, CyclePhase.ROLLOUT)


@pytest.mark.parametrize(
    ("state_type", "data", "named"),
    [
        (RunState, {"cycle": "two"}, "'cycle' ('two') must be an integer >= 0"),
        (RunState, {"goal_cursor": True}, "'goal_cursor' (True) must be an integer >= 0"),
        (RunState, {"phase": "train"}, "'phase' ('train') must be one of rollout, distill"),
        (RunState, {"tested": 1}, "'tested' (1) must be true or false"),
        (RunState, {"stopped_early_after": "x"}, "'stopped_early_after' ('x') must be a cycle"),
        (RunState, {"round": 1}, "unknown field(s) round"),
        (ColdStartState, {"round": -1}, "'round' (-1) must be an integer >= 0"),
        (ColdStartState, {"round": 1.5}, "'round' (1.5) must be an integer >= 0"),
        (ColdStartState, {"phase": "update"}, "'phase' ('update') must be one of data, train"),
        (ColdStartState, {"done": "yes"}, "'done' ('yes') must be true or false"),
        (ColdStartState, {"history": [1]}, "'history' must be a list of objects"),
        (ColdStartState, {"current": []}, "'current' must be an object"),
        (ColdStartState, {"cycle": 1, "goal_cursor": 0}, "unknown field(s) cycle, goal_cursor"),
    ],
)
def test_from_dict_refuses_a_field_of_a_wrong_type_and_names_it(state_type, data, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        state_type.from_dict(data)


OLD_CYCLE_STATE = {
    "cycle": 2,
    "current": {"rollout.episodes": 4},
    "done": False,
    "goal_cursor": 6,
    "history": [{"cycle": 0}, {"cycle": 1}],
    "phase": "distill",
}
"""A ``state.json`` an improvement run saved before ``stopped_early_after`` and ``tested``."""
OLD_COLD_START_STATE = {
    "current": {},
    "done": True,
    "history": [{"round": 0, "train.loss": 1.5}],
    "phase": "",
    "round": 1,
}
"""A ``state.json`` a finished one-round cold start saved (``asdict`` of its old state)."""


def test_state_files_written_before_the_shared_state_load_unchanged(tmp_path):
    (tmp_path / "state.json").write_text(json.dumps(OLD_CYCLE_STATE))
    run = RunFiles(tmp_path).load_state()
    assert (run.cycle, run.phase, run.goal_cursor, run.done) == (2, "distill", 6, False)
    assert run.history == [{"cycle": 0}, {"cycle": 1}] and run.current == {"rollout.episodes": 4}
    assert (run.stopped_early_after, run.tested) == (None, False)
    assert run.completed(2, CyclePhase.DISTILL) and not run.completed(2, CyclePhase.UPDATE)

    (tmp_path / "state.json").write_text(json.dumps(OLD_COLD_START_STATE))
    cold = read_run_state(tmp_path / "state.json", ColdStartState, "cold-start run")
    assert (cold.round, cold.phase, cold.done) == (1, "", True)
    assert cold.history == [{"round": 0, "train.loss": 1.5}]
    assert cold.to_dict() == OLD_COLD_START_STATE  # saved again, the same object


def test_a_damaged_state_file_is_a_checkpoint_error_naming_the_file_and_the_run(tmp_path):
    path = tmp_path / "state.json"
    path.write_text('{"round": "one"}')
    with pytest.raises(CheckpointError, match=r"state.json is damaged: 'round' \('one'\).*"
                       r"the cold-start run cannot be resumed"):  # fmt: skip
        read_run_state(path, ColdStartState, "cold-start run")
    path.write_text("[1]")
    with pytest.raises(CheckpointError, match="must hold a JSON object.*the run cannot be"):
        read_run_state(path, RunState, "run")


def prepare(root, settings, *, resume, check_resume=None, state_type=RunState, what="run"):
    return prepare_run_folder(
        root,
        settings,
        resume=resume,
        what=what,
        state_type=state_type,
        check_resume=check_resume or (lambda state: settings),
    )


def test_a_new_run_writes_its_settings_and_a_fresh_state(tmp_path):
    root = tmp_path / "runs" / "r"
    state = prepare(root, {"cold_start": {"goals": 3}}, resume=False, state_type=ColdStartState)
    assert state == ColdStartState()
    assert json.loads((root / "config.json").read_text()) == {"cold_start": {"goals": 3}}
    assert json.loads((root / "state.json").read_text()) == ColdStartState().to_dict()


@pytest.mark.parametrize(
    ("state_type", "what"), [(RunState, "run"), (ColdStartState, "cold-start run")]
)
def test_a_folder_holding_a_run_is_refused_without_resume_and_left_alone(
    tmp_path, state_type, what
):
    prepare(tmp_path, {"a": 1}, resume=False, state_type=state_type, what=what)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(CheckpointError, match=f"already holds a {what}; pass --resume to continue"):
        prepare(tmp_path, {"a": 2}, resume=False, state_type=state_type, what=what)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_resume_with_changed_settings_is_refused_and_writes_nothing(tmp_path):
    prepare(tmp_path, {"cycle": {"group_size": 2}}, resume=False)
    RunFiles(tmp_path).save_state(RunState(cycle=1, phase="rollout", goal_cursor=2))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    seen = []

    def refuse(state):
        seen.append(state)
        raise CheckpointError("--resume with different settings than config.json")

    with pytest.raises(CheckpointError, match="different settings"):
        prepare(tmp_path, {"cycle": {"group_size": 3}}, resume=True, check_resume=refuse)
    assert seen == [RunState(cycle=1, phase="rollout", goal_cursor=2)]  # checked the saved state
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_resume_clears_killed_writes_and_saves_the_settings_the_check_returns(tmp_path):
    prepare(tmp_path, {"cycle": {"cycles": 1}, "options": {"x": 1}}, resume=False)
    RunFiles(tmp_path).save_state(RunState(cycle=1, phase="update"))
    stale = tmp_path / "checkpoints" / ".cycle-0001.k3j2.tmp"
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"\0" * 16)
    kept = tmp_path / "checkpoints" / "cycle-0000"
    kept.mkdir()

    def keep_saved_options(state):
        assert not stale.exists()  # the temps go before the trainer's check
        return {"cycle": {"cycles": 2}, "options": {"x": 1}}

    state = prepare(
        tmp_path, {"cycle": {"cycles": 2}}, resume=True, check_resume=keep_saved_options
    )
    assert state == RunState(cycle=1, phase="update")
    assert json.loads((tmp_path / "config.json").read_text()) == {
        "cycle": {"cycles": 2},
        "options": {"x": 1},
    }
    assert kept.exists() and not stale.exists()


def test_resuming_a_folder_without_a_run_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="state.json.*the run cannot be resumed"):
        prepare(tmp_path, {"a": 1}, resume=True)
    assert list(tmp_path.iterdir()) == []
