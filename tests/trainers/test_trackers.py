"""``skillrl train --report-to``: TensorBoard by default, wandb / trackio as extras, refused when
missing before anything loads; every tracker gets each cycle's numeric metrics at step = cycle."""

from __future__ import annotations

import importlib.util
import sys
import types

import pytest
from click.testing import CliRunner

import skillrl_cli.train as train_command
from cli import main
from skillrl_core.errors import ConfigError, DependencyNotInstalled
from trainers.cycle.config import CycleConfig
from trainers.cycle.run_files import RunFiles
from trainers.cycle.run_settings import check_resume_settings, run_settings
from trainers.cycle.trackers import (
    HostedTracker,
    TensorBoardTracker,
    check_tracker_installed,
    open_tracker,
    scalar_metrics,
    tracker_run_id,
)
from trainers.update.config import GRPOConfig

ROW = {"cycle": 2, "eval.success_rate": 0.5, "eval.episodes": 10, "bank.snapshot": "s-2",
       "update.skipped": False, "checkpoint": "/tmp/x"}  # fmt: skip


class Started(Exception):
    pass


@pytest.fixture
def started(monkeypatch):
    """Stop ``skillrl train`` where it would load the model; keep the settings it reached."""
    calls = []

    def capture(settings, processes, **_display):
        calls.append(settings)
        raise Started()

    monkeypatch.setattr(train_command, "run_with_progress", capture)
    return calls


@pytest.fixture
def installed(monkeypatch):
    """Pretend exactly the named tracker packages are (not) importable."""
    real = importlib.util.find_spec

    def pretend(present: dict[str, bool]) -> None:
        def find_spec(name, *args, **kwargs):
            if name in present:
                return object() if present[name] else None
            return real(name, *args, **kwargs)

        monkeypatch.setattr(importlib.util, "find_spec", find_spec)

    return pretend


class FakeHostedModule(types.ModuleType):
    """Stands in for ``wandb`` / ``trackio``: records init, log and finish."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.inits: list[dict] = []
        self.logs: list[tuple[dict, int]] = []
        self.finished = 0

    def init(self, **kwargs):
        self.inits.append(kwargs)
        return self

    def log(self, metrics, step=None):
        self.logs.append((metrics, step))

    def finish(self):
        self.finished += 1


def test_only_numbers_are_reported_and_the_cycle_is_the_step_not_a_metric():
    assert scalar_metrics(ROW) == {"eval.success_rate": 0.5, "eval.episodes": 10.0}


def test_a_missing_extra_is_refused_with_its_install_command(installed):
    installed({"wandb": False, "trackio": False})
    with pytest.raises(DependencyNotInstalled, match=r"pip install 'skillrl\[wandb\]'"):
        check_tracker_installed("wandb")
    with pytest.raises(DependencyNotInstalled, match=r"pip install 'skillrl\[trackio\]'"):
        check_tracker_installed("trackio")
    with pytest.raises(ConfigError, match="mlflow"):
        check_tracker_installed("mlflow")


def test_an_unknown_tracker_is_refused_by_the_config():
    with pytest.raises(ConfigError, match=r"report_to \('mlflow'\)"):
        CycleConfig(report_to="mlflow")
    assert CycleConfig().report_to == "tensorboard"


def test_train_refuses_a_missing_tracker_in_one_line_before_anything_loads(
    workspace, started, installed
):
    installed({"wandb": False})
    result = CliRunner().invoke(main, ["train", "--report-to", "wandb"])
    assert result.exit_code == 1
    assert started == []  # refused before the model and the cycles
    lines = [line for line in result.output.splitlines() if line.strip()]
    refusal = "Error: --report-to wandb needs the wandb package: pip install 'skillrl[wandb]'"
    assert lines == [refusal]
    assert not (workspace / "runs").exists()


def test_train_reports_to_tensorboard_by_default_and_to_an_installed_extra(
    workspace, started, installed
):
    assert isinstance(CliRunner().invoke(main, ["train"]).exception, Started)
    assert started[0].cycle.report_to == "tensorboard"
    installed({"trackio": True})
    result = CliRunner().invoke(main, ["train", "--run-name", "t", "--report-to", "trackio"])
    assert isinstance(result.exception, Started), result.output
    assert started[1].cycle.report_to == "trackio"


def test_train_help_names_the_trackers():
    text = CliRunner().invoke(main, ["train", "--help"]).output
    assert "--report-to [tensorboard|wandb|trackio]" in text
    assert "skillrl[wandb]" in text


def test_the_tracker_may_change_on_resume(tmp_path):
    files = RunFiles(tmp_path / "run")
    files.save_config(run_settings(CycleConfig(), GRPOConfig()))
    check_resume_settings(files, CycleConfig(report_to="wandb"), GRPOConfig())  # no refusal


def test_tensorboard_gets_each_metric_as_a_scalar_at_the_cycle(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tracker = open_tracker("tensorboard", tmp_path, {})
    assert isinstance(tracker, TensorBoardTracker)
    tracker.log(ROW)
    tracker.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert sorted(events.Tags()["scalars"]) == ["eval/episodes", "eval/success_rate"]
    (point,) = events.Scalars("eval/success_rate")
    assert point.step == 2 and point.value == pytest.approx(0.5)


@pytest.mark.parametrize("name", ["wandb", "trackio"])
def test_a_hosted_tracker_resumes_one_run_and_logs_each_cycle(tmp_path, monkeypatch, name):
    fake = FakeHostedModule(name)
    monkeypatch.setitem(sys.modules, name, fake)
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    monkeypatch.delenv("TRACKIO_PROJECT", raising=False)
    folder = tmp_path / "my-run"
    tracker = HostedTracker(name, folder, {"cycle": {"group_size": 4}})
    tracker.log(ROW)
    tracker.log({**ROW, "cycle": 3, "eval.success_rate": 0.75})
    tracker.close()
    (init,) = fake.inits  # one tracker run for the whole training run
    assert init["project"] == "skillrl" and init["name"] == "my-run"
    assert init["resume"] == "allow" and init["config"] == {"cycle": {"group_size": 4}}
    if name == "wandb":
        assert init["id"] == tracker_run_id(folder) and init["dir"] == str(folder)
    assert [step for _, step in fake.logs] == [2, 3]
    assert fake.logs[1][0]["eval.success_rate"] == 0.75
    assert fake.finished == 1


def test_the_tracker_run_id_is_stable_per_folder_and_differs_between_workspaces(tmp_path):
    assert tracker_run_id(tmp_path / "a" / "r") == tracker_run_id(tmp_path / "a" / "r")
    assert tracker_run_id(tmp_path / "a" / "r") != tracker_run_id(tmp_path / "b" / "r")
    assert tracker_run_id(tmp_path / "a" / "r").startswith("r-")
