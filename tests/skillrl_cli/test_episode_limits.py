"""The turn limit and a turn's token budget are declared once: every command takes the same."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

from skillrl_core.episode_limits import MAX_NEW_TOKENS, MAX_TURNS
from skillrl_core.option_fields import option_spec


def _field(cls: type, name: str) -> dataclasses.Field:
    return {f.name: f for f in dataclasses.fields(cls)}[name]


def _owners() -> dict[str, list[type]]:
    from skillrl_cli.eval import EvalChoices
    from skillrl_cli.options import PlayedModel
    from skillrl_cli.run import RunChoices
    from skillrl_cli.skills_measure import MeasureChoices
    from trainers.cold_start.sft_config import ColdStartConfig
    from trainers.cycle.config import CycleConfig

    return {
        "max_turns": [RunChoices, EvalChoices, MeasureChoices, CycleConfig, ColdStartConfig],
        "max_new_tokens": [PlayedModel, CycleConfig, ColdStartConfig],
    }


@pytest.mark.parametrize(
    ("name", "default"), [("max_turns", MAX_TURNS), ("max_new_tokens", MAX_NEW_TOKENS)]
)
def test_every_owner_declares_the_same_default_and_bound(name: str, default: int) -> None:
    for cls in _owners()[name]:
        field = _field(cls, name)
        spec = option_spec(field)
        assert spec is not None, f"{cls.__name__}.{name} is not an option"
        assert field.default == default, cls.__name__
        assert spec.low == 1, cls.__name__


@pytest.mark.parametrize("command", ["run", "eval"])
def test_played_commands_refuse_a_zero_token_budget(command: str) -> None:
    from cli import main

    result = CliRunner().invoke(main, [command, "--max-new-tokens", "0"])
    assert result.exit_code == 2
    assert "--max-new-tokens" in result.output


def test_run_plays_with_the_budget_it_is_given(tmp_path) -> None:
    from skillrl.prompts import PromptConfig
    from skillrl_cli.options import PlayedModel
    from skillrl_cli.run import model_play

    played = PlayedModel(model=str(tmp_path), max_new_tokens=7)
    play = model_play("webshop", played, PromptConfig(), str(tmp_path), temperature=0.0, seed=0)
    assert play.sampling.max_new_tokens == 7
    default = model_play(
        "webshop", PlayedModel(model=str(tmp_path)), PromptConfig(), None, temperature=0.0, seed=0
    )
    assert default.sampling.max_new_tokens == MAX_NEW_TOKENS  # what eval and train play with
