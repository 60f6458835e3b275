"""A trained model's recorded settings (skills, prompt budget, decoding) reach `run` and `eval`
unless an option says otherwise; the shipped adapter is what `--model auto` plays on a fresh
workspace, and `--model base` the untrained model."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import skillrl.agents.llm
import skillrl.policies
import skillrl.rollout
import trainers.common.policy_rollouts
from cli import main
from skillrl.policies.model_settings import ModelSettings, shipped_adapter
from skillrl_core.errors import ModelLoadError


class Built(Exception):
    pass


def checkpoint_files(folder):
    """The files a checkpoint folder holds (not a loadable model: loading is faked here)."""
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    save_file({"w": np.zeros(1, dtype=np.float32)}, str(folder / "model.safetensors"))
    return folder


@pytest.fixture
def trained(tmp_path):
    folder = checkpoint_files(tmp_path / "trained")
    ModelSettings(env_id="webshop", skills=False, max_prompt_tokens=300, constrained=False).save(
        folder
    )
    return folder


@pytest.fixture
def captured(monkeypatch):
    seen: dict = {}

    def agent(policy, prompt_config, *, constrained, config, uses_skills):
        seen.update(
            budget=prompt_config.max_prompt_tokens, constrained=constrained, skills=uses_skills
        )
        raise Built()

    def rollouts(policy, **kwargs):
        seen.update(
            budget=kwargs["prompt_config"].max_prompt_tokens,
            constrained=kwargs["constrained"],
            skills=kwargs["bank"] is not None,
        )
        raise Built()

    monkeypatch.setattr(skillrl.policies, "load_policy", lambda *a, **k: object())
    monkeypatch.setattr(skillrl.agents.llm, "LLMAgent", agent)
    monkeypatch.setattr(trainers.common.policy_rollouts, "PolicyRollouts", rollouts)
    return seen


def invoke(args):
    result = CliRunner().invoke(main, args)
    assert isinstance(result.exception, Built), result.output
    return result


@pytest.mark.parametrize("command", [["run", "--no-record"], ["eval"]])
def test_the_models_settings_reach_the_command(workspace, trained, captured, command):
    result = invoke([*command, "--model", str(trained)])
    assert captured == {"budget": 300, "constrained": False, "skills": False}
    said = " ".join(result.output.split())
    assert (
        "settings the model was trained under: no skills, 300-token prompts, free decoding" in said
    )


@pytest.mark.parametrize(
    ("command", "skills"),
    [(["run", "--no-record", "--skills"], True), (["eval", "--skills", "on"], True)],
)
def test_options_the_user_gives_override_the_models_settings(
    workspace, trained, captured, command, skills
):
    invoke([*command, "--model", str(trained), "--max-prompt-tokens", "700", "--constrained"])
    assert captured == {"budget": 700, "constrained": True, "skills": skills}


@pytest.fixture
def rich_pages(tmp_path):
    folder = checkpoint_files(tmp_path / "rich")
    ModelSettings(
        env_id="webshop",
        skills=False,
        max_prompt_tokens=512,
        env_options={"observation_mode": "text_rich"},
    ).save(folder)
    return folder


@pytest.fixture
def env_config_seen(monkeypatch):
    import skillrl_cli.run as run_command

    seen: dict = {}

    def play(settings, console, *_display):
        # Every episode plays under the settled environment settings.
        configs = [dict(start.env_config) for start in settings.starts]
        assert all(config == configs[0] for config in configs)
        seen["run"] = configs[0]
        raise Built()

    def rollouts(policy, **kwargs):
        seen["eval"] = dict(kwargs["env_config"])
        raise Built()

    monkeypatch.setattr(run_command, "play_on_screen", play)
    monkeypatch.setattr(skillrl.policies, "load_policy", lambda *a, **k: object())
    monkeypatch.setattr(trainers.common.policy_rollouts, "PolicyRollouts", rollouts)
    return seen


@pytest.mark.parametrize("command", ["run", "eval"])
def test_the_models_environment_options_reach_the_environment_unless_given(
    workspace, rich_pages, env_config_seen, command
):
    extra = ["--no-record"] if command == "run" else []
    said = " ".join(invoke([command, *extra, "--model", str(rich_pages)]).output.split())
    assert env_config_seen[command]["observation_mode"] == "text_rich"
    assert "observation_mode=text_rich" in said
    invoke([command, *extra, "--model", str(rich_pages), "--env-option", "observation_mode=text"])
    assert env_config_seen[command]["observation_mode"] == "text"


@pytest.mark.parametrize("command", [["run", "--no-record"], ["eval"], ["train"]])
def test_a_model_trained_on_another_environment_is_refused(
    workspace, rich_pages, env_config_seen, command
):
    """Its skills, prompt budget and decoding are WebShop's: not played on Sokoban silently."""
    result = CliRunner().invoke(main, [*command, "--env", "sokoban", "--model", str(rich_pages)])
    assert result.exit_code == 1 and not env_config_seen, result.output
    assert "was trained on 'webshop' (its skillrl.json), not 'sokoban'" in result.output
    assert "Traceback" not in result.output and not (workspace / "runs").exists()
    (rich_pages / "skillrl.json").unlink()  # a copy without it plays on the defaults
    invoke(["run", "--no-record", "--env", "sokoban", "--model", str(rich_pages)])
    assert "observation_mode" not in env_config_seen["run"]


def test_a_model_without_settings_runs_on_the_defaults(workspace, tmp_path, captured):
    invoke(["run", "--no-record", "--model", str(checkpoint_files(tmp_path / "plain"))])
    assert captured == {"budget": 512, "constrained": True, "skills": True}


def test_a_corrupt_settings_file_is_named(tmp_path):
    (tmp_path / "skillrl.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="skillrl.json cannot be read"):
        ModelSettings.load(tmp_path)
    (tmp_path / "skillrl.json").write_text(json.dumps({"env_id": "webshop"}))
    with pytest.raises(ModelLoadError, match="skillrl.json"):
        ModelSettings.load(tmp_path)


def test_auto_plays_the_shipped_adapter_on_a_fresh_workspace_and_base_the_untrained_model(
    workspace, monkeypatch, tmp_path
):
    import skillrl.policies.model_settings as model_settings

    adapter = tmp_path / "adapters" / "webshop"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text("{}")
    ModelSettings(env_id="webshop", skills=False, max_prompt_tokens=384,
                  figures={"test_successes": 70, "test_goals": 100}).save(adapter)  # fmt: skip
    monkeypatch.setattr(model_settings, "SHIPPED_ADAPTERS", tmp_path / "adapters")
    loaded = []

    def capture(config, *args, **kwargs):
        loaded.append(config.model)
        raise Built()

    monkeypatch.setattr(skillrl.policies, "load_policy", capture)
    said = " ".join(invoke(["run", "--no-record"]).output.split())
    assert "adapter shipped with skillrl, 70/100 test goals solved" in said
    assert "384-token prompts" in said
    said = " ".join(invoke(["run", "--no-record", "--model", "base"]).output.split())
    assert "untrained" in said
    assert loaded == [str(adapter), "embedded"]
    assert shipped_adapter("sokoban") is None


@pytest.mark.slow
def test_the_shipped_adapter_loads_offline_and_plays_from_a_fresh_workspace(workspace):
    adapter = shipped_adapter("webshop")
    if adapter is None:
        pytest.fail("the package ships no WebShop adapter (skillrl/adapters/webshop/)")
    # A rank-48 adapter over all 30 layers (the RFT run's change, kept whole): 28 MiB.
    assert (adapter / "adapter_model.safetensors").stat().st_size <= 32 * 2**20
    settings = ModelSettings.load(adapter)
    assert settings is not None and settings.recipe and settings.figures
    assert settings.skills, "the shipped adapter must be the skill-augmented policy"
    args = ["run", "--env", "webshop", "--episodes", "1", "--max-turns", "6", "--no-record",
            "--threads", "1", "--json"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "adapter shipped with skillrl" in " ".join(result.stderr.split())
    episode = json.loads(result.stdout)["episodes"][0]
    assert all(step["valid"] for step in episode["steps"])
    assert episode["skills_enabled"]
    assert all(step["retrieved_ids"] for step in episode["steps"]), "a turn without an entry"
