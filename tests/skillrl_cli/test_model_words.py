"""``--model`` takes the same words in run, eval, skills measure, train and sft.

``auto``, ``shipped``, ``base`` (older spelling ``embedded``) or a path, all resolved by
``skillrl_cli.options.resolve_model``; ``base`` is the embedded model, never a hub download.
Each command is stopped where it would load the model, and the model it asked for is checked.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import skillrl_cli.train as train_command
from cli import main
from skillrl.policies.model_settings import shipped_adapter
from skillrl_cli.options import resolve_model
from skillrl_core.errors import ConfigError


class Loaded(Exception):
    """Raised where a command would load its model; carries the model it asked for."""


@pytest.fixture
def asked(monkeypatch) -> list[str]:
    """The models commands ask to load (the load itself is stopped)."""
    import skillrl.policies

    models: list[str] = []

    def load(config, *args, **kwargs):
        models.append(config.model)
        raise Loaded(config.model)

    def start(settings, processes):
        models.append(settings.policy.model)
        raise Loaded(settings.policy.model)

    monkeypatch.setattr(skillrl.policies, "load_policy", load)
    monkeypatch.setattr(train_command, "run_with_progress", start)
    return models


COMMANDS = {
    "run": ["run", "--no-record", "--no-skills"],
    "eval": ["eval", "--skills", "off", "--goals", "1"],
    "skills measure": ["skills", "measure", "--goals", "1"],
    "train": ["train", "--run-name", "words"],
    "sft": ["sft", "--run-name", "words"],
}


def model_asked(command: str, word: str, asked: list[str], env: str = "webshop") -> str:
    result = CliRunner().invoke(main, [*COMMANDS[command], "--env", env, "--model", word])
    assert isinstance(result.exception, Loaded), result.output
    return asked[-1]


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("word", ["base", "embedded"])
def test_base_is_the_embedded_model_in_every_command(command, word, workspace, asked):
    assert model_asked(command, word, asked) == "embedded"  # the packaged weights, no hub id


@pytest.mark.parametrize("command", list(COMMANDS))
def test_shipped_is_the_environments_adapter_in_every_command(command, workspace, asked):
    shipped = shipped_adapter("sokoban")
    assert shipped is not None
    assert model_asked(command, "shipped", asked, env="sokoban") == str(shipped)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_auto_without_a_trained_checkpoint_is_the_shipped_adapter(command, workspace, asked):
    assert model_asked(command, "auto", asked, env="sokoban") == str(shipped_adapter("sokoban"))


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_missing_model_folder_is_refused_before_anything_loads(command, workspace, asked):
    missing = str(workspace / "no-such-model")
    result = CliRunner().invoke(main, [*COMMANDS[command], "--model", missing])
    assert result.exit_code == 1 and asked == []
    assert "does not exist" in result.output


def test_train_saves_what_auto_found_so_a_resume_starts_from_the_same_model(
    workspace, monkeypatch
):
    saved = []

    def start(settings, processes):
        saved.append(settings.options["model"])
        raise Loaded()

    monkeypatch.setattr(train_command, "run_with_progress", start)
    result = CliRunner().invoke(main, ["train", "--env", "sokoban", "--model", "auto"])
    assert isinstance(result.exception, Loaded), result.output
    assert saved == [str(shipped_adapter("sokoban"))]
    result = CliRunner().invoke(main, ["train", "--env", "sokoban", "--model", "shipped"])
    assert saved[-1] == "shipped"  # as named: the package may move between resumes


def test_shipped_for_an_environment_without_one_is_a_clear_error(workspace, monkeypatch):
    import skillrl.policies.model_settings as model_settings

    monkeypatch.setattr(model_settings, "shipped_adapter", lambda env_id: None)
    with pytest.raises(ConfigError, match="no adapter ships for environment 'sokoban'; use"):
        resolve_model("shipped", "transformers", str(workspace), _Silent(), "sokoban")


class _Silent:
    def print(self, *args, **kwargs) -> None:
        pass
