"""Bad settings of run, eval, train and sft are refused before anything loads, in one line.

Each refusal must exit non-zero with one line naming the setting, load no model (the loader is
replaced by one that fails the test; a subprocess shows torch was never even imported) and leave
the workspace as it was (nothing created in it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import envs
from cli import main
from skillrl.prompts.builder import PromptConfig, fixed_prompt_tokens
from skillrl_cli.upfront_checks import check_prompt_budget
from skillrl_core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_model(monkeypatch):
    """Fail the test if any command gets as far as loading a model."""
    import skillrl.policies

    def refuse(config, *args, **kwargs):
        raise AssertionError(f"a model was loaded ({config.model}) before the options were checked")

    monkeypatch.setattr(skillrl.policies, "load_policy", refuse)


def refused(workspace: Path, *args: str) -> str:
    """Run the command; return its one error line, after checking it left no trace."""
    result = CliRunner().invoke(main, [*args, "--workspace", str(workspace)])
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, result.output
    assert not any(workspace.iterdir()), f"the refused command wrote {list(workspace.iterdir())}"
    return errors[0]


# -- --run-name -----------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["train", "sft"])
@pytest.mark.parametrize("name", ["", "   ", " padded", "../escape", ".hidden"])
def test_a_run_name_that_is_no_plain_folder_name_is_refused(workspace, no_model, command, name):
    line = refused(workspace, command, "--run-name", name)
    assert f"--run-name ({name!r}) must be a plain folder name" in line


# -- --max-prompt-tokens --------------------------------------------------------------------------


def test_the_prompt_budget_must_hold_the_system_message_and_the_format():
    adapter = envs.adapter_for("webshop")
    need = fixed_prompt_tokens(adapter, PromptConfig())
    both = adapter.system_prompt() + adapter.format_text(True)
    assert abs(need - len(both) / 4) <= 2  # the builder's 4-characters-a-token estimate
    check_prompt_budget("webshop", need)  # exactly enough is enough
    with pytest.raises(ConfigError, match=rf"\({need - 1}\) is below the {need} tokens"):
        check_prompt_budget("webshop", need - 1)


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--no-record"],
        ["eval", "--skills", "off"],
        ["train", "--run-name", "x"],
        ["sft", "--no-skills"],
    ],
)
@pytest.mark.parametrize("env_id", ["webshop", "sokoban"])
def test_a_prompt_budget_below_the_fixed_prompt_is_refused(workspace, no_model, command, env_id):
    need = fixed_prompt_tokens(envs.adapter_for(env_id), PromptConfig())
    line = refused(workspace, *command, "--env", env_id, "--max-prompt-tokens", "16")
    assert f"--max-prompt-tokens (16) is below the {need} tokens" in line
    assert f"give at least {need}" in line and repr(env_id) in line


# -- model folders --------------------------------------------------------------------------------


def _model_folder(tmp_path: Path, kind: str) -> Path:
    folder = tmp_path / kind
    folder.mkdir()
    if kind == "empty":
        return folder
    if kind == "adapter-without-weights":
        (folder / "adapter_config.json").write_text('{"base_model_name_or_path": "embedded"}')
        return folder
    if kind == "not-a-model":
        (folder / "notes.txt").write_text("hello")
        return folder
    (folder / "config.json").write_text('{"model_type": "llama"}')
    if kind == "config-only":
        return folder
    (folder / "model.safetensors").write_bytes(b"not a safetensors file at all")
    (folder / "tokenizer.json").write_text("{}")
    return folder  # "corrupt-weights"


FOLDER_PROBLEMS = {
    "empty": "is empty",
    "not-a-model": "has no config.json",
    "config-only": "has config.json but no weights",
    "corrupt-weights": "model.safetensors is corrupt",
    "adapter-without-weights": "has adapter_config.json but no weights",
}


@pytest.mark.parametrize("kind", list(FOLDER_PROBLEMS))
@pytest.mark.parametrize(
    "command",
    [
        ["run", "--no-record", "--model"],
        ["eval", "--skills", "off", "--model"],
        ["train", "--init"],
    ],
)
def test_a_folder_that_is_no_model_says_what_it_lacks(workspace, tmp_path, no_model, kind, command):
    folder = _model_folder(tmp_path, kind)
    line = refused(workspace, *command, str(folder))
    assert "ModelLoadError" not in line and str(folder) in line and FOLDER_PROBLEMS[kind] in line
    assert "sentencepiece" not in line and "tiktoken" not in line


def test_a_checkpoint_without_a_tokenizer_is_refused(workspace, tmp_path, no_model):
    import numpy as np
    from safetensors.numpy import save_file

    folder = tmp_path / "no-tokenizer"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    save_file({"w": np.zeros(2, dtype=np.float32)}, str(folder / "model.safetensors"))
    line = refused(workspace, "run", "--no-record", "--model", str(folder))
    assert "has no tokenizer" in line and "tokenizer.json" in line


def test_a_real_checkpoint_and_a_shipped_adapter_pass_the_folder_check(tiny_checkpoint):
    from skillrl.policies.model_folders import check_model_folder
    from skillrl.policies.model_settings import shipped_adapter

    check_model_folder(tiny_checkpoint)
    shipped = shipped_adapter("webshop")
    if shipped is not None:
        check_model_folder(shipped)


def _adapter(folder: Path, config: object, tensors: dict | None = None) -> Path:
    """A LoRA adapter folder: ``config`` as adapter_config.json, ``tensors`` as its weights."""
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps(config))
    if tensors is None:  # rank 4 over a 16-wide layer
        prefix = "base_model.model.model.layers.0.self_attn.q_proj"
        tensors = {
            f"{prefix}.lora_A.weight": np.zeros((4, 16), dtype=np.float32),
            f"{prefix}.lora_B.weight": np.zeros((16, 4), dtype=np.float32),
        }
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    return folder


LORA = {"peft_type": "LORA", "r": 4, "base_model_name_or_path": "embedded"}


def _broken_adapter(tmp_path: Path, kind: str) -> Path:
    import numpy as np

    folder = tmp_path / kind
    if kind == "config-a-list":
        return _adapter(folder, [])
    if kind == "unknown-peft-type":
        return _adapter(folder, {**LORA, "peft_type": "NOPE"})
    if kind == "rank-mismatch":
        return _adapter(folder, {**LORA, "r": 8})
    if kind == "no-lora-tensors":
        return _adapter(folder, LORA, {"unrelated.weight": np.zeros(2, dtype=np.float32)})
    if kind == "missing-base-model":
        return _adapter(folder, {**LORA, "base_model_name_or_path": str(tmp_path / "gone")})
    folder.mkdir()  # "weights-a-symlink-loop"
    (folder / "adapter_config.json").write_text(json.dumps(LORA))
    (folder / "adapter_model.safetensors").symlink_to(folder / "loop")
    (folder / "loop").symlink_to(folder / "adapter_model.safetensors")
    return folder


ADAPTER_PROBLEMS = {
    "config-a-list": "must hold a JSON object (peft's LoraConfig), not a list",
    "unknown-peft-type": "has peft_type 'NOPE': only LoRA adapters",
    "rank-mismatch": "(rank 4) but r is 8",
    "no-lora-tensors": "hold no LoRA tensors",
    "missing-base-model": "adapter_config.json names (base_model_name_or_path) is not a model",
    "weights-a-symlink-loop": "a broken symbolic link, or a loop of links",
}


@pytest.mark.parametrize("kind", list(ADAPTER_PROBLEMS))
@pytest.mark.parametrize(
    "command",
    [
        ["run", "--no-record", "--model"],
        ["eval", "--skills", "off", "--model"],
        ["train", "--model"],
    ],
)
def test_an_adapter_whose_files_do_not_make_a_model_is_refused_before_it_loads(
    workspace, tmp_path, no_model, kind, command
):
    folder = _broken_adapter(tmp_path, kind)
    line = refused(workspace, *command, str(folder))
    assert ADAPTER_PROBLEMS[kind] in line and str(folder) in line, line


def test_a_well_formed_adapter_passes_the_folder_check(tmp_path):
    from skillrl.policies.model_folders import check_model_folder

    check_model_folder(_adapter(tmp_path / "good", LORA))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ([], "must hold a JSON object, not a list"),
        ({"env_id": "webshop", "skills": True, "max_prompt_tokens": 512, "env_options": "x"},
         "'env_options' ('x') must be an object"),
        ({"env_id": "webshop", "skills": "yes", "max_prompt_tokens": 512},
         "'skills' ('yes') must be true or false"),
        ({"env_id": "webshop", "skills": True, "max_prompt_tokens": 0}, "must be >= 1"),
        ({"env_id": "webshop", "skills": False}, "lacks the key(s) 'max_prompt_tokens'"),
    ],
)  # fmt: skip
def test_a_model_settings_file_of_the_wrong_shape_is_refused_in_one_line(
    workspace, tmp_path, no_model, settings, message
):
    folder = _adapter(tmp_path / "adapter", LORA)
    (folder / "skillrl.json").write_text(json.dumps(settings))
    for command in (["run", "--no-record"], ["eval", "--skills", "off"], ["train"]):
        line = refused(workspace, *command, "--model", str(folder))
        assert "skillrl.json cannot be read" in line and message in line, line


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "tests" / "trainers"))
    from tiny_checkpoint import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "model")


# -- splits, goals, environment options, data folders ---------------------------------------------

PLAYING = [
    ["run", "--no-record"],
    ["eval", "--skills", "off"],
    ["train", "--run-name", "x"],
    ["sft", "--no-skills"],
]


@pytest.mark.parametrize(
    ("command", "split_option"),
    [(["run", "--no-record"], "--split"), (["eval", "--skills", "off"], "--split"),
     (["train", "--run-name", "x"], "--eval-split")],
)  # fmt: skip
def test_a_split_that_does_not_exist_is_refused(workspace, no_model, command, split_option):
    line = refused(workspace, *command, split_option, "nope")
    assert f"{split_option}: split ('nope') must be one of test, eval, train" in line


@pytest.mark.parametrize(
    ("goal", "message"),
    [
        ("500", "--goal 500 reaches past the last goal of split 'test' (500 goals, 0-499)"),
        ("abc", "--goal 'abc' is neither a goal index of split 'test' (0-499) nor a goal id"),
        ("-1", "--goal '-1' is neither a goal index"),
    ],
)
def test_run_refuses_a_goal_out_of_range_or_unknown(workspace, no_model, goal, message):
    assert message in refused(workspace, "run", "--no-record", "--goal", goal)


def test_run_refuses_episodes_that_run_past_the_split(workspace, no_model):
    line = refused(workspace, "run", "--no-record", "--goal", "498", "--episodes", "3")
    assert "--goal 498 --episodes 3 reaches past the last goal of split 'test'" in line


@pytest.mark.parametrize(
    "command",
    [["run", "--no-record"], ["eval", "--skills", "off"], ["train", "--run-name", "x"]],
)
def test_env_options_that_empty_the_split_are_refused(workspace, no_model, command):
    line = refused(workspace, *command, "--env", "sokoban", "--env-option", "test_rooms=0")
    assert "'test' of environment 'sokoban' has no goals" in line and "test_rooms=0" in line


@pytest.mark.parametrize("command", [["sft", "--no-skills"], ["train", "--run-name", "x"]])
def test_env_options_that_empty_the_training_split_are_refused(workspace, no_model, command):
    # 50 products make about 330 goals, all of them test goals: none is left to train on.
    line = refused(workspace, *command, "--env-option", "num_products=50")
    assert "'train' of environment 'webshop' has no goals" in line and "num_products=50" in line


@pytest.mark.parametrize("command", PLAYING)
def test_a_data_folder_that_does_not_exist_is_refused(workspace, tmp_path, no_model, command):
    missing = tmp_path / "no-such-data"
    line = refused(workspace, *command, "--env-option", f"data_dir={missing}")
    assert f"Error: {missing}: data folder not found" in line and "DataFileError" not in line


def test_train_refuses_more_eval_goals_than_the_split_has(workspace, no_model):
    line = refused(
        workspace, "train", "--env", "sokoban", "--env-option", "test_rooms=2", "--eval-goals", "7"
    )
    assert "--eval-goals (7) is more than the 6 goals of --eval-split 'test'" in line


# -- --goals ranges -------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["run", "--no-record"], ["eval", "--skills", "off"]])
@pytest.mark.parametrize(
    ("text", "why"),
    [("5-3", "FIRST (5) is after LAST (3)"), ("a-b", "is not N"), ("-1", "is not N"),
     ("400-600", "reaches past"), ("0", "names no goal")],
)  # fmt: skip
def test_bad_goal_ranges_are_refused_naming_the_text_and_split_size(
    workspace, no_model, command, text, why
):
    line = refused(workspace, *command, "--goals", text)
    assert f"--goals {text!r}" in line and why in line and "split 'test' has 500 goals" in line


def test_run_goals_takes_the_place_of_goal_and_episodes(workspace, no_model):
    result = CliRunner().invoke(main, ["run", "--no-record", "--goals", "3-4", "--episodes", "2"])
    assert result.exit_code == 2 and "leave out --episodes" in result.output


def test_run_plays_a_goal_range_as_goal_and_episodes_do(workspace):
    def goals(*args: str) -> list[str]:
        result = CliRunner().invoke(
            main, ["run", "--policy", "expert", "--no-record", "--max-turns", "1", "--json", *args]
        )
        assert result.exit_code == 0, result.output
        return [e["goal_id"] for e in json.loads(result.stdout)["episodes"]]

    ranged = goals("--goals", "250-252")
    assert ranged == goals("--goal", "250", "--episodes", "3") and len(set(ranged)) == 3
    assert goals("--goals", "2") == goals("--goal", "0", "--episodes", "2")


def test_help_documents_goal_ranges():
    for command in ("run", "eval"):
        text = CliRunner().invoke(main, [command, "--help"]).output
        assert "--goals N|FIRST-LAST" in text and "250-349" in text


# -- no model, not even torch ------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--no-record", "--max-prompt-tokens", "16"],
        ["eval", "--goals", "5-3"],
        ["train", "--run-name", ""],
        ["sft", "--env-option", "data_dir=/no/such/folder"],
        ["run", "--no-record", "--goal", "abc"],
    ],
)
def test_a_refusal_never_imports_torch(tmp_path, args):
    script = (
        "import sys\nfrom cli import main\n"
        f"try:\n    main({args!r}, standalone_mode=False)\n"
        "except Exception as e:\n    print('refused:', e)\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SKILLRL_WORKSPACE": str(tmp_path / "ws")},
    )
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "False", done.stdout + done.stderr
    assert any(line.startswith("refused:") for line in lines)
    assert not (tmp_path / "ws").exists()


# -- environment options that would hang, goals beyond the split ----------------------------------


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("reverse_steps=100000000", "reverse_steps (100000000) must be at most 1,000"),
        ("rooms_per_category=1000000000000", "must be at most 1,000,000"),
        ("categories=", "categories is empty: give category names such as '6x6-1box"),
    ],
)
@pytest.mark.parametrize("command", PLAYING)
def test_an_environment_option_that_would_hang_is_refused(
    workspace, no_model, command, option, message
):
    line = refused(workspace, *command, "--env", "sokoban", "--env-option", option)
    assert message in line and "NoneType" not in line, line


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (["sft", "--no-skills", "--goals", "9851"], "goals (9851)"),
        (
            ["sft", "--no-skills", "--dagger-rounds", "1", "--dagger-goals", "9851"],
            "dagger_goals (9851)",
        ),
        (["train", "--no-skills", "--cold-start", "--cold-start-goals", "9851"], "goals (9851)"),
    ],
)
def test_more_cold_start_goals_than_the_split_holds_are_refused(workspace, no_model, command, name):
    # Sokoban's training split: 10,000 rooms a category less 50 test and 100 eval rooms.
    line = refused(workspace, *command, "--env", "sokoban", "--env-option", "categories=6x6-1box")
    assert f"{name} is more than the 9850 goals of the 'train' split of 'sokoban'" in line, line


@pytest.mark.parametrize(
    "command",
    [["eval", "--goals", "110"], ["run", "--goal", "105"], ["run", "--goals", "95-105"]],
)
def test_goals_past_the_split_the_models_env_settings_leave_are_refused_before_playing(
    workspace, command
):
    # The shipped Sokoban adapter plays 6x6-1box rooms: 100 test goals, not the default's 300.
    line = refused(workspace, *command, "--env", "sokoban")
    assert "100 goals" in line, line
