"""The commands share their words: ``--model`` in run, eval, skills measure, train and sft;
``--skills`` in run and eval.

``--model``: ``auto``, ``shipped``, ``base`` (older spelling ``embedded``) or a path, all resolved
by ``skillrl_cli.options.resolve_model``; ``base`` is the embedded model, never a hub download.
Each command is stopped where it would load the model, and the model it asked for is checked.
``--skills``: ``on``/``off`` (or the switch alone, or ``--no-skills``), and ``both`` in eval.
"""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

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

    def start(settings, processes, **_display):
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


def test_train_saves_what_auto_found_so_a_resume_starts_from_the_same_model(workspace, monkeypatch):
    saved = []

    def start(settings, processes, **_display):
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


# -- --skills ------------------------------------------------------------------------------------


@pytest.fixture
def skills_read(monkeypatch) -> list[object]:
    """What ``--skills`` reads as in run and eval (each command stopped once it has its value)."""
    import skillrl_cli.eval as eval_module
    import skillrl_cli.run as run_module

    read: list[object] = []

    def stop(*args, **kwargs):
        ctx = click.get_current_context()
        given = ctx.get_parameter_source("skills") is not click.core.ParameterSource.DEFAULT
        read.append((ctx.params["skills"], given))
        raise Loaded()

    monkeypatch.setattr(run_module, "settle_play", stop)
    monkeypatch.setattr(eval_module, "check_decoding", stop)  # the first call after parsing
    return read


RUN_SKILLS = {
    (): (None, False),  # as the model was trained
    ("--skills",): (True, True),
    ("--skills", "on"): (True, True),
    ("--skills=on",): (True, True),
    ("--skills", "off"): (False, True),
    ("--no-skills",): (False, True),
    ("--no-skills", "--skills"): (True, True),  # the last one given wins
}
EVAL_SKILLS = {
    (): (None, False),
    ("--skills",): ("on", True),
    ("--skills", "on"): ("on", True),
    ("--skills", "off"): ("off", True),
    ("--no-skills",): ("off", True),
    ("--skills", "both"): ("both", True),
}


@pytest.mark.parametrize(("command", "words", "expected"), [
    *(("run", words, expected) for words, expected in RUN_SKILLS.items()),
    *(("eval", words, expected) for words, expected in EVAL_SKILLS.items()),
])  # fmt: skip
def test_skills_words_in_run_and_eval(command, words, expected, workspace, skills_read):
    result = CliRunner().invoke(main, [command, *words, "--json"])
    assert isinstance(result.exception, Loaded), result.output
    assert skills_read == [expected]


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=1, max_size=12).filter(
    lambda w: w.strip().lower() not in {"on", "off", "both", "1", "0", "t", "f", "true", "false",
                                        "y", "n", "yes", "no", ""} and not w.startswith("-")
))  # fmt: skip
def test_any_other_skills_word_is_refused_naming_the_option(word):
    for command in ("run", "eval"):
        result = CliRunner().invoke(main, [command, "--skills", word])
        assert result.exit_code == 2 and "Invalid value for '--skills'" in result.output


def test_no_skills_takes_no_word():
    result = CliRunner().invoke(main, ["run", "--no-skills=on"])
    assert result.exit_code == 2 and "'--no-skills' does not take a value" in result.output
