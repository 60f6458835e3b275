"""Options shared by commands: --env-option, --model auto, and checks made before a model loads."""

from __future__ import annotations

import io
import json
import os

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from cli import main
from skillrl_cli.options import (
    _parse_env_options,
    env_config_from,
    env_option_text,
    resolve_model,
)
from skillrl_core.errors import ConfigError
from trainers.evaluate import EVAL_DTYPE


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def no_model(monkeypatch):
    """Fail the test if any command gets as far as loading a model."""
    import skillrl.policies

    def refuse(config, *args, **kwargs):
        raise AssertionError(f"a model was loaded ({config.model}) before the options were checked")

    monkeypatch.setattr(skillrl.policies, "load_policy", refuse)


# -- --env-option parsing ---------------------------------------------------------------------


def parse(*items: str):
    return _parse_env_options(None, None, items)


def test_env_option_values_are_yaml_scalars():
    assert parse("observation_mode=text_rich", "num_products=50", "show_attrs=true") == {
        "observation_mode": "text_rich",
        "num_products": 50,
        "show_attrs": True,
    }
    assert parse("data_dir=~/webshop/data", "goals=") == {
        "data_dir": "~/webshop/data",
        "goals": None,
    }
    assert parse("data_dir=a=b") == {"data_dir": "a=b"}  # only the first = splits


@pytest.mark.parametrize("bad", ["observation_mode", "=x", "a=[1, 2]", "a={b: 1}", "a=: :"])
def test_env_option_rejects_what_is_not_key_equals_scalar(bad):
    with pytest.raises(click.BadParameter):
        parse(bad)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",))),
)


@pytest.mark.parametrize("value", ["\x85", "a\x85b", "\u2028", "\x85\x85", "é\u2029"])
def test_yaml_line_breaks_survive_the_round_trip(value):
    assert parse(env_option_text("_", value)) == {"_": value}


@given(key=st.from_regex(r"[a-z_][a-z0-9_]{0,20}", fullmatch=True), value=scalars)
def test_a_written_env_option_reads_back_as_itself(key, value):
    # A settings file's env-option mapping becomes KEY=VALUE texts: every scalar must survive.
    assert parse(env_option_text(key, value)) == {key: value}


@given(st.text(max_size=60))
def test_any_text_is_parsed_or_rejected_with_bad_parameter(text):
    try:
        result = parse(text)
    except click.BadParameter:
        return
    assert list(result) == [text.partition("=")[0].strip()]


def test_env_settings_are_checked_against_the_env_config_dataclass():
    assert env_config_from("webshop", {"observation_mode": "text_rich"}) == {
        "observation_mode": "text_rich"
    }
    with pytest.raises(
        ConfigError, match=r"unknown option 'colour'.*valid: data_dir, .*observation_mode"
    ):
        env_config_from("webshop", {"colour": "red"})
    with pytest.raises(ConfigError, match="observation_mode .'html'. must be one of"):
        env_config_from("webshop", {"observation_mode": "html"})
    with pytest.raises(click.UsageError, match="--max-turns"):
        env_config_from("webshop", {"max_turns": 3})


# -- checked before any model loads -------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["train", "--run-name", "x"],
        ["eval", "--skills", "off"],
        ["run", "--no-skills", "--no-record"],
    ],
)
def test_an_unknown_env_fails_in_one_line_before_the_model_loads(command, workspace, no_model):
    result = invoke(*command, "--env", "nosuchenv")
    assert result.exit_code == 1, result.output
    assert "unknown environment 'nosuchenv'" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "command",
    [
        ["train", "--run-name", "x"],
        ["eval", "--skills", "off"],
        ["run", "--no-skills", "--no-record"],
        ["bootstrap", "--episodes", "1"],
    ],
)
def test_an_unknown_env_option_names_the_key_and_the_valid_ones(command, workspace, no_model):
    result = invoke(*command, "--env-option", "colour=red")
    assert result.exit_code == 1, result.output
    line = result.output.strip()
    assert "unknown option 'colour'" in line and "observation_mode" in line and "data_dir" in line


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("num_products=1.5", "num_products (1.5) must be an integer"),
        ("shuffle_seed=abc", "shuffle_seed ('abc') must be an integer"),
        ("show_attrs=1.5", "show_attrs"),
    ],
)
@pytest.mark.parametrize(
    "command", [["run", "--no-skills", "--no-record"], ["eval", "--skills", "off"]]
)
def test_an_env_option_of_the_wrong_type_is_one_line_naming_it(
    command, workspace, no_model, option, message
):
    result = invoke(*command, "--env-option", option)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and message in result.output


def test_env_options_reach_the_environment(workspace):
    result = invoke(
        "run", "--policy", "expert", "--no-record", "--max-turns", "2",
        "--env-option", "observation_mode=text_rich",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "[button]" in result.output  # text_rich renders buttons as [button] X [button_]
    plain = invoke("run", "--policy", "expert", "--no-record", "--max-turns", "2")
    assert "[button]" not in plain.output


# -- --model auto ---------------------------------------------------------------------------------


def whole_checkpoint(folder):
    """A folder that passes for a model: config, a (tiny) safetensors file and a tokenizer."""
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    save_file({"weight": np.zeros(1, dtype=np.float32)}, str(folder / "model.safetensors"))


def fake_run(workspace, name, cycles, mtime, env_id="webshop"):
    folder = workspace / "runs" / name
    for cycle in range(1, cycles + 1):
        checkpoint = folder / "checkpoints" / f"cycle-{cycle:04d}"
        whole_checkpoint(checkpoint)
    history = [{"cycle": c, "eval.success_rate": 0.1 * c} for c in range(cycles + 1)]
    (folder / "state.json").write_text(json.dumps({"history": history, "done": True}))
    config = {"cycle": {"cycles": cycles, "env_id": env_id}}
    (folder / "config.json").write_text(json.dumps(config))
    os.utime(folder / "state.json", (mtime, mtime))
    return folder


def test_auto_is_the_newest_runs_last_checkpoint_and_says_so(workspace, monkeypatch):
    import skillrl.policies.model_settings as model_settings

    out = io.StringIO()
    console = Console(file=out, width=300)
    monkeypatch.setattr(model_settings, "shipped_adapter", lambda env_id: None)
    assert resolve_model("auto", "transformers", str(workspace), console) == "embedded"
    assert "embedded" in out.getvalue()
    monkeypatch.undo()
    fake_run(workspace, "old", 3, mtime=1_000)
    new = fake_run(workspace, "new", 2, mtime=2_000)
    (workspace / "runs" / "new" / "checkpoints" / ".cycle-0003.abc.tmp").mkdir()  # unfinished
    chosen = resolve_model("auto", "transformers", str(workspace), console)
    assert chosen == str(new / "checkpoints" / "cycle-0002")
    assert chosen in out.getvalue() and "--model base" in out.getvalue()
    assert resolve_model("embedded", "transformers", str(workspace), console) == "embedded"
    assert resolve_model("base", "transformers", str(workspace), console) == "embedded"
    assert resolve_model("auto", "openai", str(workspace), console) == "embedded"


def fake_sft_run(workspace, name, env_id, mtime):
    """What ``skillrl sft --run-name <name>`` leaves: its files in ``runs/<name>/sft``."""
    root = workspace / "runs" / name / "sft"
    checkpoint = root / "checkpoints" / "round-0000"
    whole_checkpoint(checkpoint)
    state = {"round": 1, "phase": "", "done": True, "history": [{"round": 0}], "current": {}}
    (root / "state.json").write_text(json.dumps(state))
    config = {"cold_start": {"env_id": env_id, "dagger_rounds": 0}}
    (root / "config.json").write_text(json.dumps(config))
    os.utime(root / "state.json", (mtime, mtime))
    return checkpoint


def test_auto_plays_the_environments_own_model_and_says_which_runs_it_skipped(workspace):
    shop = fake_run(workspace, "shop", 2, mtime=1_000)
    boxes = fake_run(workspace, "boxes", 1, mtime=2_000, env_id="sokoban")
    out = io.StringIO()
    console = Console(file=out, width=300)
    chosen = resolve_model("auto", "transformers", str(workspace), console, "webshop")
    assert chosen == str(shop / "checkpoints" / "cycle-0002")
    assert "skipped newer runs trained for another environment than 'webshop': 'boxes'" in (
        out.getvalue()
    )
    out.truncate(0)
    chosen = resolve_model("auto", "transformers", str(workspace), console, "sokoban")
    assert chosen == str(boxes / "checkpoints" / "cycle-0001")
    assert "skipped" not in out.getvalue()


def test_auto_says_when_a_checkpoint_without_figures_takes_the_shipped_adapters_place(
    workspace,
):
    from skillrl.policies.model_settings import ModelSettings, shipped_adapter

    toy = fake_sft_run(workspace, "toy", "webshop", mtime=1_000)
    out = io.StringIO()
    console = Console(file=out, width=400)
    assert resolve_model("auto", "transformers", str(workspace), console, "webshop") == str(toy)
    said = " ".join(out.getvalue().split())
    assert f"model: {toy} (the newest checkpoint trained for 'webshop'" in said
    figures = ModelSettings.load(shipped_adapter("webshop")).figures
    shipped_solved = f"{figures['test_successes']}/{figures['test_goals']}"
    assert (
        "this checkpoint records no test figures, in place of the adapter shipped for "
        f"'webshop', which solved {shipped_solved} test goals; --model shipped plays that one"
        in said
    )
    # Recorded figures: a lower rate is said, an equal or higher one is not.
    settings = ModelSettings(env_id="webshop", skills=True, max_prompt_tokens=512)
    for successes, lower in ((1, True), (100, False)):
        settings.figures = {"test_successes": successes, "test_goals": 100}
        settings.save(toy)
        out.truncate(0)
        out.seek(0)
        resolve_model("auto", "transformers", str(workspace), console, "webshop")
        said = " ".join(out.getvalue().split())
        warned = f"solved 1/100 test goals when it was made, a lower rate than the {shipped_solved}"
        assert (warned in said) is lower, said
        assert "records no test figures" not in said
    # --model shipped plays the package's adapter, in run and eval as in train.
    out.truncate(0)
    shipped = resolve_model("shipped", "transformers", str(workspace), console, "webshop")
    assert shipped == str(shipped_adapter("webshop"))
    assert "model: the SmolLM2-135M-Instruct adapter shipped" in out.getvalue()


def test_base_model_hint_names_the_environment(workspace, monkeypatch):
    import skillrl.policies.model_settings as model_settings

    monkeypatch.setattr(model_settings, "shipped_adapter", lambda env_id: None)
    fake_run(workspace, "shop", 1, mtime=1_000)
    out = io.StringIO()
    chosen = resolve_model("auto", "transformers", str(workspace), Console(file=out), "sokoban")
    assert chosen == "embedded"
    text = " ".join(out.getvalue().split())
    assert "skillrl sft --env sokoban" in text and "skillrl train --env sokoban" in text
    assert "'shop' (webshop)" in text  # said, not played


def test_an_sft_run_is_listed_by_runs_and_played_by_auto(workspace, monkeypatch):
    import skillrl.policies

    fake_run(workspace, "shop", 1, mtime=1_000)
    checkpoint = fake_sft_run(workspace, "tiny-sft", "webshop", mtime=2_000)
    listed = CliRunner().invoke(main, ["runs", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [(r["name"], r["kind"], r["default_model"]) for r in rows] == [
        ("tiny-sft", "sft", True),
        ("shop", "train", False),
    ]
    assert rows[0]["last_checkpoint"] == str(checkpoint)
    table = CliRunner().invoke(main, ["runs"], env={"COLUMNS": "300"})
    assert "tiny-sft" in table.output and "1/1 rounds" in table.output
    loaded = []

    def capture(config, *args, **kwargs):
        loaded.append(config.model)
        raise Loaded()

    monkeypatch.setattr(skillrl.policies, "load_policy", capture)
    played = CliRunner().invoke(main, ["run", "--no-skills", "--no-record"])
    assert isinstance(played.exception, Loaded), played.output
    assert loaded == [str(checkpoint)]


class Loaded(Exception):
    pass


def test_eval_and_run_default_to_the_trained_checkpoint(workspace, monkeypatch):
    import skillrl.policies

    folder = fake_run(workspace, "r", 2, mtime=2_000)
    loaded = []

    def capture(config, *args, **kwargs):
        loaded.append(config.model)
        raise Loaded()

    monkeypatch.setattr(skillrl.policies, "load_policy", capture)
    for command in (["eval", "--skills", "off"], ["run", "--no-skills", "--no-record"]):
        result = CliRunner().invoke(main, command)
        assert isinstance(result.exception, Loaded), result.output
        assert str(folder / "checkpoints" / "cycle-0002") in result.output
    assert loaded == [str(folder / "checkpoints" / "cycle-0002")] * 2


def test_dtype_reaches_the_policy_of_eval_run_and_skills_measure(workspace, monkeypatch):
    import skillrl.policies

    loaded = []

    def capture(config, *args, **kwargs):
        loaded.append(config.dtype)
        raise Loaded()

    monkeypatch.setattr(skillrl.policies, "load_policy", capture)
    commands = (
        ["eval", "--skills", "off", "--model", "base"],
        ["run", "--no-skills", "--no-record", "--model", "base"],
        ["skills", "measure", "--model", "base", "--goals", "1"],
    )
    for command in commands:
        result = CliRunner().invoke(main, [*command, "--dtype", "float32"])
        assert isinstance(result.exception, Loaded), result.output
    # Unset, eval plays in fp32 (scores must not move with the batch) and run keeps 'auto'.
    for command in (["eval", "--skills", "off"], ["run", "--no-skills", "--no-record"]):
        result = CliRunner().invoke(main, [*command, "--model", "base"])
        assert isinstance(result.exception, Loaded), result.output
    assert loaded == ["float32", "float32", "float32", EVAL_DTYPE, "auto"]
    refused = CliRunner().invoke(main, ["eval", "--dtype", "int4"])
    assert refused.exit_code == 2 and "'int4' is not one of" in refused.output
