"""``skillrl train --config``, the saved options that ``--resume`` reads, ``skillrl runs``."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

import skillrl_cli.train as train_command
from cli import main
from trainers.cycle.run_files import RunFiles, RunState
from trainers.cycle.run_settings import options_digest, run_settings


class Started(Exception):
    pass


@pytest.fixture
def started(monkeypatch):
    """Stop ``skillrl train`` where it would load the model; keep what it was asked to run."""
    calls = []

    def capture(settings, processes, **_display):
        calls.append((settings.cycle, settings.grpo, settings))
        assert processes.is_main and not processes.distributed  # no launcher here
        raise Started()

    monkeypatch.setattr(train_command, "run_with_progress", capture)
    return calls


def train(*args):
    return CliRunner().invoke(main, ["train", *args])


def start(folder, started_run, state=None):
    """Write what ``TrainingRun`` writes when it starts: ``config.json`` and ``state.json``."""
    cycle, grpo, settings = started_run
    files = RunFiles(folder)
    files.save_config(run_settings(cycle, grpo, settings.options))
    files.save_state(RunState(**(state or {})))
    return json.loads(files.config_path.read_text())


def test_a_config_file_sets_options_and_the_command_line_overrides_it(workspace, tmp_path, started):
    config = tmp_path / "run.yaml"
    config.write_text(
        "goals-per-cycle: 7\n"
        "group_size: 3\n"
        "lr: 3.0e-6\n"
        "skills: false\n"
        "lora: true\n"
        "run-name: from-file\n"
        "env-option:\n  observation_mode: text_rich\n  num_products: 500\n"
    )
    result = train("--config", str(config), "--group-size", "5")
    assert isinstance(result.exception, Started), result.output
    cycle, grpo, _ = started[0]
    assert cycle.goals_per_cycle == 7 and cycle.group_size == 5  # the flag wins
    assert grpo.learning_rate == 3e-6 and grpo.use_peft and not cycle.skills
    assert cycle.env_config == {"observation_mode": "text_rich", "num_products": 500}
    saved = start(workspace / "runs" / "from-file", started[0])["options"]
    assert saved["group-size"] == 5 and saved["goals-per-cycle"] == 7 and saved["use-peft"] is True
    assert saved["env-option"] == {"observation_mode": "text_rich", "num_products": 500}
    assert "workspace" not in saved and "resume" not in saved and "config" not in saved


def test_torch_compile_is_off_by_default_and_reaches_the_update(workspace, started):
    assert isinstance(train("--run-name", "eager").exception, Started)
    assert started[0][1].torch_compile is False
    assert isinstance(train("--run-name", "compiled", "--torch-compile").exception, Started)
    assert started[1][1].torch_compile is True


def test_tf32_is_on_by_default_and_no_tf32_reaches_the_update(workspace, started):
    assert isinstance(train("--run-name", "tf32").exception, Started)
    assert started[0][1].tf32 is True
    assert isinstance(train("--run-name", "full-fp32", "--no-tf32").exception, Started)
    assert started[1][1].tf32 is False


def test_steps_hold_whole_groups_by_default_and_shuffled_turns_on_request(workspace, started):
    assert isinstance(train("--run-name", "grouped").exception, Started)
    assert started[0][1].whole_group_steps is True
    assert isinstance(train("--run-name", "mixed", "--shuffled-turns").exception, Started)
    assert started[1][1].whole_group_steps is False


def test_a_config_file_can_ask_for_shuffled_turns(workspace, tmp_path, started):
    config = tmp_path / "run.yaml"
    config.write_text("whole-groups: false\n")
    result = train("--config", str(config), "--run-name", "from-file")
    assert isinstance(result.exception, Started), result.output
    assert started[0][1].whole_group_steps is False


def test_a_run_saved_before_whole_group_steps_resumes_with_shuffled_turns(workspace, started):
    first = train("--run-name", "old", "--shuffled-turns")
    assert isinstance(first.exception, Started), first.output
    run = workspace / "runs" / "old"
    saved = start(run, started[0], {"cycle": 1})
    # What the run's files held before the setting existed: no config field, no option.
    del saved["grpo"]["whole_group_steps"], saved["options"]["whole-group-steps"]
    saved["options_digest"] = options_digest(saved["options"])
    (run / "config.json").write_text(json.dumps(saved))

    refused = train("--run-name", "old", "--resume")
    assert refused.exit_code == 1, refused.output
    assert "grpo.whole_group_steps: False -> True" in refused.output
    again = train("--run-name", "old", "--resume", "--shuffled-turns")
    assert isinstance(again.exception, Started), again.output
    assert started[-1][1].whole_group_steps is False


def test_a_run_saved_under_the_old_setting_names_resumes(workspace, started):
    first = train("--run-name", "named", "--step-weight", "0.5", "--temperature", "0.7")
    assert isinstance(first.exception, Started), first.output
    run = workspace / "runs" / "named"
    saved = start(run, started[0], {"cycle": 1})
    # config.json as runs saved it before one name per setting: the step weight under its old
    # name, and the rollout temperature twice (kept equal by the CLI).
    saved["grpo"]["step_advantage_weight"] = saved["grpo"].pop("step_weight")
    saved["cycle"]["train_temperature"] = saved["grpo"]["temperature"]
    (run / "config.json").write_text(json.dumps(saved))
    again = train("--run-name", "named", "--resume")
    assert isinstance(again.exception, Started), again.output
    assert started[-1][1].step_weight == 0.5 and started[-1][1].temperature == 0.7
    changed = train("--run-name", "named", "--resume", "--step-weight", "1.0")
    assert changed.exit_code == 1 and "would change step-weight from 0.5" in changed.output


def test_a_run_saved_under_the_old_option_names_resumes_and_still_refuses_a_change(
    workspace, started
):
    first = train("--run-name", "old-names", "--lora", "--batch-size", "2", "--grad-accum", "3")
    assert isinstance(first.exception, Started), first.output
    run = workspace / "runs" / "old-names"
    saved = start(run, started[0], {"cycle": 1})
    # The options block as runs saved it before each option took its config field's name.
    renamed = {"use-peft": "lora", "per-device-train-batch-size": "batch-size"}
    for new, old in {**renamed, "gradient-accumulation-steps": "grad-accum"}.items():
        saved["options"][old] = saved["options"].pop(new)
    saved["options_digest"] = options_digest(saved["options"])
    (run / "config.json").write_text(json.dumps(saved))

    again = train("--run-name", "old-names", "--resume")
    assert isinstance(again.exception, Started), again.output
    grpo = started[-1][1]
    assert grpo.use_peft and grpo.per_device_train_batch_size == 2
    assert grpo.gradient_accumulation_steps == 3
    changed = train("--run-name", "old-names", "--resume", "--batch-size", "4")
    assert changed.exit_code == 1, changed.output
    assert "would change per-device-train-batch-size from 2" in changed.output


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("colour: red\n", "unknown key 'colour'; valid keys: "),
        ("cycles: [1, 2]\n", "'cycles' must be a single value"),
        ("cycles: zero\n", "'zero' is not a valid integer"),
        ("- cycles\n", "must hold a mapping"),
        ("env-option: 3\n", "must be a mapping of settings"),
        ("env-option:\n  colour: red\n", "unknown option 'colour' for environment 'webshop'"),
    ],
)
def test_a_bad_config_file_is_one_clear_error(workspace, tmp_path, started, text, message):
    config = tmp_path / "run.yaml"
    config.write_text(text)
    result = train("--config", str(config))
    assert result.exit_code in (1, 2) and message in result.output, result.output
    assert not started


def test_resume_takes_the_saved_settings_and_only_cycles_from_the_command_line(
    workspace, tmp_path, started
):
    config = tmp_path / "run.yaml"
    config.write_text("cycles: 1\ngoals-per-cycle: 6\nenv-option: {observation_mode: text_rich}\n")
    first = train("--config", str(config), "--run-name", "r", "--seed", "9")
    assert isinstance(first.exception, Started), first.output
    run = workspace / "runs" / "r"
    start(run, started[0], {"cycle": 2, "done": True})  # a finished run

    again = train("--run-name", "r", "--resume", "--cycles", "4")
    assert isinstance(again.exception, Started), again.output
    cycle, _grpo, settings = started[1]
    assert (cycle.cycles, cycle.goals_per_cycle, cycle.seed) == (4, 6, 9)
    assert cycle.env_config == {"observation_mode": "text_rich"}
    assert settings.options["cycles"] == 4 and settings.options["seed"] == 9

    # Another setting is refused before any model loads, and the saved settings stay as they were.
    changed = train("--run-name", "r", "--resume", "--group-size", "3")
    assert changed.exit_code == 1, changed.output
    assert "would change group-size from 4" in changed.output, changed.output
    assert len(started) == 2
    assert json.loads((run / "config.json").read_text())["options"]["group-size"] == 4

    # The run's config.json repeats it as a --config file (its options are taken).
    again = train("--config", str(run / "config.json"), "--run-name", "r2")
    assert isinstance(again.exception, Started), again.output
    cycle, _grpo, settings = started[2]
    assert (cycle.cycles, cycle.goals_per_cycle, cycle.seed) == (1, 6, 9)
    assert settings.options["run-name"] == "r2"


def test_a_resume_may_switch_to_merged_checkpoints_and_back_but_not_change_lora(workspace, started):
    assert isinstance(train("--run-name", "r", "--lora").exception, Started)
    assert started[0][0].merged_checkpoints is False  # LoRA runs save adapters by default
    start(workspace / "runs" / "r", started[0], {"cycle": 2})
    merged = train("--run-name", "r", "--resume", "--merged-checkpoints")
    assert isinstance(merged.exception, Started), merged.output
    assert started[1][0].merged_checkpoints is True
    assert isinstance(train("--run-name", "r", "--resume").exception, Started)
    assert started[2][0].merged_checkpoints is False  # as the run saved it
    full = train("--run-name", "r", "--resume", "--no-lora")
    assert full.exit_code == 1 and "would change use-peft" in full.output, full.output


def test_a_run_without_saved_options_resumes_only_with_the_settings_it_saved(workspace, started):
    first = train("--run-name", "bare", "--goals-per-cycle", "3")
    assert isinstance(first.exception, Started), first.output
    run = workspace / "runs" / "bare"
    saved = start(run, started[0], {"cycle": 1})
    saved.pop("options")  # a run a library caller started: its configs, no launch options
    (run / "config.json").write_text(json.dumps(saved))
    refused = train("--run-name", "bare", "--resume")
    assert refused.exit_code == 1 and "cycle.goals_per_cycle: 3 -> 4" in refused.output
    again = train("--run-name", "bare", "--resume", "--goals-per-cycle", "3")
    assert isinstance(again.exception, Started), again.output


def test_a_config_json_without_launch_options_is_refused_as_a_config_file(tmp_path, started):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"cycle": {}, "grpo": {}}))
    result = train("--config", str(config))
    assert result.exit_code == 2 and "without the options it was launched with" in result.output
    assert not started


def test_start_and_resume_refuse_the_wrong_folder_before_loading_anything(workspace, started):
    missing = train("--run-name", "nothing", "--resume")
    assert missing.exit_code == 1 and "no run to continue" in missing.output
    run = workspace / "runs" / "taken"
    run.mkdir(parents=True)
    (run / "state.json").write_text("{}")
    taken = train("--run-name", "taken")
    assert taken.exit_code == 1 and "already holds a run" in taken.output
    assert not (run / "config.json").exists() and not started


def whole_checkpoint(folder):
    """A folder that passes for a model: config, a (tiny) safetensors file and a tokenizer."""
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    save_file({"weight": np.zeros(1, dtype=np.float32)}, str(folder / "model.safetensors"))


def fake_run(workspace, name, cycles, mtime, done=True):
    folder = workspace / "runs" / name
    for cycle in range(1, cycles + 1):
        checkpoint = folder / "checkpoints" / f"cycle-{cycle:04d}"
        whole_checkpoint(checkpoint)
    folder.mkdir(parents=True, exist_ok=True)
    rates = [0.2, 0.5, 0.4, 0.6][: cycles + 1]
    history = [{"cycle": c, "eval.success_rate": r} for c, r in enumerate(rates)]
    (folder / "state.json").write_text(json.dumps({"history": history, "done": done}))
    (folder / "config.json").write_text(json.dumps({"cycle": {"cycles": 3, "env_id": "webshop"}}))
    os.utime(folder / "state.json", (mtime, mtime))
    return folder


def test_runs_lists_every_run_newest_first_with_its_checkpoints(workspace):
    empty = CliRunner().invoke(main, ["runs"])
    assert empty.exit_code == 0 and "no training runs" in empty.output
    old = fake_run(workspace, "old", 3, mtime=1_000)
    new = fake_run(workspace, "new", 2, mtime=2_000, done=False)
    (workspace / "runs" / "not-a-run").mkdir()  # no state.json: not listed
    result = CliRunner().invoke(main, ["runs", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["name"] for r in rows] == ["new", "old"]
    assert rows[0]["cycles_completed"] == 2 and rows[0]["cycles_planned"] == 3
    assert rows[0]["done"] is False and rows[1]["done"] is True
    assert (rows[0]["best_success"], rows[0]["best_cycle"]) == (0.5, 1)
    assert (rows[1]["best_success"], rows[1]["best_cycle"], rows[1]["last_success"]) == (
        0.6,
        3,
        0.6,
    )
    assert rows[1]["checkpoints"] == [
        str(old / "checkpoints" / f"cycle-{c:04d}") for c in (1, 2, 3)
    ]
    assert rows[0]["default_model"] and not rows[1]["default_model"]
    assert rows[0]["last_checkpoint"] == str(new / "checkpoints" / "cycle-0002")
    table = CliRunner().invoke(main, ["runs"], env={"COLUMNS": "300"})
    assert "new" in table.output and "old" in table.output and "0.60 (cycle 3)" in table.output


def test_the_shipped_adapter_trains_under_the_settings_it_records(workspace, started):
    result = train("--model", "shipped", "--run-name", "rl")
    assert isinstance(result.exception, Started), result.output
    cycle, _, settings = started[0]
    from skillrl.policies.model_settings import ModelSettings, shipped_adapter

    recorded = ModelSettings.load(shipped_adapter("webshop"))
    assert settings.policy.model.endswith("adapters/webshop")
    assert cycle.skills == recorded.skills  # whichever adapter ships, its own setting
    assert cycle.env_config == {"observation_mode": "text_rich"}
    assert "settings the model was trained under" in result.output
    flag = "--no-skills" if recorded.skills else "--skills"
    given = train("--model", "shipped", "--run-name", "rl-skills", flag)
    assert isinstance(given.exception, Started), given.output
    assert started[1][0].skills != recorded.skills  # an option the user gives wins
    sokoban = train("--model", "shipped", "--env", "sokoban", "--run-name", "s")
    assert isinstance(sokoban.exception, Started), sokoban.output
    cycle, _, settings = started[2]
    assert settings.policy.model.endswith("adapters/sokoban")
    assert cycle.env_config == {"categories": "6x6-1box", "observation_mode": "positions"}
    assert cycle.skills is ModelSettings.load(shipped_adapter("sokoban")).skills


def test_shipped_is_refused_for_an_environment_no_adapter_ships_for(
    workspace, started, monkeypatch, tmp_path
):
    from skillrl.policies import model_settings

    monkeypatch.setattr(model_settings, "SHIPPED_ADAPTERS", tmp_path / "no-adapters")
    refused = train("--model", "shipped", "--env", "sokoban", "--run-name", "s")
    assert refused.exit_code == 1
    assert "no adapter ships for environment 'sokoban'" in refused.output


DAMAGED_RUN_FILES = {
    "state-list": ("state.json", b"[1, 2]", "must hold a JSON object, not list"),
    "state-binary": ("state.json", b"\xff\xfe\x00binary", "is not UTF-8 text"),
    "state-types": ("state.json", b'{"cycle": "two", "history": []}', "'cycle' ('two')"),
    "state-history": ("state.json", b'{"history": {"a": 1}}', "'history' must be a list"),
    "state-unknown": ("state.json", b'{"cycles": 3}', "unknown field(s) cycles"),
    "state-nested": ("state.json", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "config-binary": ("config.json", b"\x00\x01\x02", "config.json"),
    "config-array": ("config.json", b"[]", "must hold a JSON object, not list"),
    "config-null-cycles": ("config.json", b'{"cycle": {"cycles": null}}', "'cycle.cycles'"),
    "config-cycle-list": ("config.json", b'{"cycle": [], "grpo": {}}', "'cycle' must be an"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGED_RUN_FILES))
def test_a_damaged_run_is_skipped_with_one_line_by_runs_and_the_auto_model(
    workspace, monkeypatch, damage
):
    from rich.console import Console

    from skillrl_cli.options import resolve_model

    name, content, message = DAMAGED_RUN_FILES[damage]
    good = fake_run(workspace, "good", 2, mtime=1_000)
    damaged = fake_run(workspace, "damaged", 3, mtime=2_000)  # newer: auto would pick it
    (damaged / name).write_bytes(content)
    os.utime(damaged / "state.json", (2_000, 2_000))
    result = CliRunner().invoke(main, ["runs", "--json"])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    assert [r["name"] for r in json.loads(result.stdout)] == ["good"]
    warning = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(warning) == 1 and "skipping run damaged" in warning[0], result.stderr
    assert name in warning[0] and message in warning[0], warning[0]
    console = Console(file=open(os.devnull, "w"))  # noqa: SIM115
    chosen = resolve_model("auto", "transformers", str(workspace), console)
    assert chosen == str(good / "checkpoints" / "cycle-0002")


@pytest.mark.parametrize("damage", sorted(DAMAGED_RUN_FILES))
def test_resuming_a_damaged_run_is_one_line_naming_the_file(workspace, started, damage):
    name, content, message = DAMAGED_RUN_FILES[damage]
    first = train("--run-name", "r", "--cycles", "2")
    assert isinstance(first.exception, Started), first.output
    run = workspace / "runs" / "r"
    start(run, started[0], {"cycle": 1})
    (run / name).write_bytes(content)
    result = train("--run-name", "r", "--resume")
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert str(run / name) in lines[0] and message in lines[0], lines[0]
    assert len(started) == 1


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe\x00binary", b"[]", b'{"cycle": {"cycles": null}, "grpo": {}}'],
    ids=["binary", "array", "null-cycles"],
)
def test_a_damaged_config_json_given_to_config_is_one_clear_error(tmp_path, started, content):
    config = tmp_path / "config.json"
    config.write_bytes(content)
    result = train("--config", str(config))
    assert result.exit_code in (1, 2) and "Traceback" not in result.output, result.output
    assert str(config) in result.output
    assert not started


def test_a_checkpoint_folder_holding_only_its_config_is_never_the_default_model(workspace):
    run = fake_run(workspace, "r", 2, mtime=1_000)
    partial = run / "checkpoints" / "cycle-0003"
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    result = CliRunner().invoke(main, ["runs", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["last_checkpoint"] == str(run / "checkpoints" / "cycle-0002")
    assert "skipping checkpoint" in result.stderr and "cycle-0003" in result.stderr


def test_runs_in_a_workspace_that_does_not_exist_fails(tmp_path):
    missing = tmp_path / "nowhere"
    result = CliRunner().invoke(main, ["runs", "--workspace", str(missing)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert str(missing) in lines[0] and "does not exist" in lines[0]


@pytest.mark.parametrize(
    ("flags", "key"),
    [
        (("--max-prompt-tokens", "1024"), "max-prompt-tokens"),
        (("--temperature", "0.3"), "temperature"),
        (("--no-skills",), "skills"),
        (("--env-option", "observation_mode=text"), "env-option"),
        (("--lora",), "use-peft"),
        (("--seed", "5"), "seed"),
    ],
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_a_resume_refuses_any_setting_but_cycles_naming_it_and_where_each_value_came_from(
    workspace, started, flags, key
):
    first = train("--run-name", "r", "--cycles", "1")
    assert isinstance(first.exception, Started), first.output
    run = workspace / "runs" / "r"
    start(run, started[0], {"cycle": 1})
    before = (run / "config.json").read_bytes()
    result = train("--run-name", "r", "--resume", "--cycles", "2", *flags)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert f"would change {key} from" in lines[0], lines[0]
    assert f"(saved in {run / 'config.json'})" in lines[0] and "(from the command line)" in lines[0]
    assert len(started) == 1 and (run / "config.json").read_bytes() == before
    assert train("--run-name", "r", "--resume", "--cycles", "2").exception.__class__ is Started


def test_a_hand_edited_options_block_is_refused_on_resume(workspace, started):
    first = train("--run-name", "r", "--cycles", "1")
    assert isinstance(first.exception, Started), first.output
    run = workspace / "runs" / "r"
    saved = start(run, started[0], {"cycle": 1})
    saved["options"]["max-prompt-tokens"] = 1024
    (run / "config.json").write_text(json.dumps(saved))
    result = train("--run-name", "r", "--resume")
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert str(run / "config.json") in lines[0] and "edited after the run saved them" in lines[0]
    assert len(started) == 1


@pytest.mark.parametrize("name", ["a\nb", "tab\there", "bell\x07"])
def test_a_run_name_with_a_control_character_is_refused(workspace, started, name):
    result = train("--run-name", name)
    assert result.exit_code == 1 and "--run-name" in result.output, result.output
    assert not (workspace / "runs").exists() and not started


def test_train_on_a_workspace_it_cannot_write_fails_before_the_model_loads(workspace, started):
    (workspace / "runs").write_text("a file where the runs folder goes")
    result = train("--run-name", "r")
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert "cannot write the run folder" in lines[0] and not started


@pytest.mark.parametrize("command", ["train", "run", "eval", "sft"])
def test_a_negative_seed_is_refused(workspace, command):
    result = CliRunner().invoke(main, [command, "--seed", "-1"])
    assert result.exit_code == 2 and "-1 is not in the range" in result.output, result.output


def test_the_shipped_rft_recipe_resumes_from_its_own_config_file(
    workspace, started, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # named, the recipe is found from any folder (the package's)
    recipe = "webshop-rft"
    first = train("--config", recipe)
    assert isinstance(first.exception, Started), first.output
    cycle, grpo, settings = started[0]
    assert grpo.estimator == "rft" and settings.policy.model.endswith("adapters/webshop")
    saved = start(settings.folder, started[0])
    assert saved["options"]["model"] == "shipped"  # as named: the package may move
    again = train("--config", recipe, "--resume", "--cycles", "6")
    assert isinstance(again.exception, Started), again.output
    assert started[1][0].cycles == 6 and started[1][1] == grpo
    changed = train("--config", recipe, "--resume", "--lr", "1e-3")
    assert changed.exit_code == 1 and "learning-rate" in changed.output


def test_a_recipe_path_and_its_shipped_name_give_the_same_run(workspace, started):
    from skillrl_cli.train_config import RECIPES

    assert isinstance(train("--config", "webshop-rft").exception, Started)
    by_path = train("--config", str(RECIPES / "webshop-rft.yaml"), "--run-name", "by-path")
    assert isinstance(by_path.exception, Started), by_path.output
    (cycle, grpo, _), (path_cycle, path_grpo, _) = started
    assert grpo == path_grpo and cycle == path_cycle and grpo.estimator == "rft"


@pytest.mark.parametrize("name", ["webshop-rtf", "no/such.yaml", "."])
def test_an_unknown_recipe_is_refused_listing_the_shipped_ones(workspace, started, name):
    result = train("--config", name)
    assert result.exit_code == 2 and not started, result.output
    text = " ".join(result.output.split())
    assert "shipped recipes: webshop-rft" in text or "is a folder" in text, text


@pytest.mark.parametrize("native", [True, False])
def test_rollout_dtype_auto_picks_bf16_only_where_native_and_the_run_saves_its_pick(
    workspace, started, monkeypatch, native
):
    import torch

    from skillrl.policies import transformers_loading

    monkeypatch.setattr(transformers_loading, "cpu_has_native_bf16", lambda: native)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    picked = "bfloat16" if native else "float32"
    assert isinstance(train("--run-name", "auto", "--rollout-dtype", "auto").exception, Started)
    cycle, _grpo, settings = started[0]
    assert cycle.rollout_dtype == picked and settings.options["rollout-dtype"] == picked
    # A rollout server decides its own format: auto asks nothing of it (no refusal).
    served = train("--run-name", "served", "--rollout-dtype", "auto", "--backend", "trl-vllm",
                   "--base-url", "http://127.0.0.1:8000")  # fmt: skip
    assert isinstance(served.exception, Started), served.output
    assert started[1][0].rollout_dtype == "float32"


def test_a_run_opens_with_its_model_environment_update_cycles_and_folder(workspace, started):
    from rich.console import Console

    from skillrl_cli.train_session import opening_lines

    assert isinstance(train("--config", "webshop-rft").exception, Started)
    settings = started[0][2]

    def said(state):
        console = Console(width=400, record=True)
        for line in opening_lines(settings, state):
            console.print(line, soft_wrap=True)
        return console.export_text().splitlines()

    lines = said(None)
    assert lines[0].startswith("model: the SmolLM2-135M-Instruct adapter shipped")
    from skillrl.policies.model_settings import ModelSettings, shipped_adapter

    figures = ModelSettings.load(shipped_adapter("webshop")).figures
    assert f"{figures['test_successes']}/{figures['test_goals']} test goals solved" in lines[0]
    assert lines[1] == (
        "environment: webshop, observation_mode=text_rich, skills retrieved every turn"
    )
    assert lines[2].startswith("update: RFT (rejection-sampling") and "LoRA r=16" in lines[2]
    assert lines[3].startswith("cycles: 6 of 32 training goals x 4 episodes")
    assert lines[3].endswith(
        "100 eval goals evaluated every 2 cycle(s) and at the last; the run keeps the cycle "
        "that solves the most and stops after 2 evaluation(s) in a row behind it; 300 test "
        "goals played at cycle 0 and by that cycle"
    )
    assert lines[4] == f"run: webshop-rft in {workspace / 'runs' / 'webshop-rft'}"
    assert len(lines) == 5  # a fresh start says nothing of resuming
    assert said(RunState(cycle=3, phase="distill"))[5] == (
        "resuming at cycle 3 after its distill phase (of 6)"
    )
    assert said(RunState(cycle=4))[5] == "resuming at cycle 4 (of 6)"
    assert said(RunState(cycle=7, done=True))[5].startswith("resuming: all 6 cycles are done")


def test_ctrl_c_ends_with_the_exact_resume_command(workspace, monkeypatch):
    import sys

    args = ["--run-name", "my run", "--cycles", "2"]
    monkeypatch.setattr(sys, "argv", ["skillrl", "train", *args])
    folder = workspace / "runs" / "my run"
    claimed = []

    def interrupted(settings, processes, **_display):
        if claimed:  # the run wrote its state before Ctrl-C
            RunFiles(folder).save_state(RunState(cycle=1))
        raise KeyboardInterrupt

    monkeypatch.setattr(train_command, "run_with_progress", interrupted)
    before = train(*args)  # interrupted while the model loads: no run yet
    assert before.exit_code == 130 and "Aborted" not in before.output, before.output
    assert "nothing to resume" in before.output
    claimed.append(True)
    after = train(*args)
    assert after.exit_code == 130 and "Aborted" not in after.output, after.output
    said = " ".join(after.output.split())
    assert "continue with skillrl train --run-name 'my run' --cycles 2 --resume" in said, said


def test_ctrl_c_during_the_cold_start_ends_with_the_resume_command(workspace, monkeypatch):
    import sys

    args = ["--run-name", "cs", "--cold-start"]
    monkeypatch.setattr(sys, "argv", ["skillrl", "train", *args])
    sft_state = workspace / "runs" / "cs" / "sft" / "state.json"

    def cold_start_interrupted(ctx, values):
        sft_state.parent.mkdir(parents=True)
        sft_state.write_text("{}")  # the cold start saved a round before Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(train_command, "settle_training", cold_start_interrupted)
    result = train(*args)
    assert result.exit_code == 130 and "Aborted" not in result.output, result.output
    said = " ".join(result.output.split())
    assert "continue with skillrl train --run-name cs --cold-start --resume" in said, said


def test_the_resume_command_keeps_the_options_and_adds_resume_once():
    from skillrl_cli.train_session import resume_command

    assert resume_command(["sft", "--goals", "3"]) == "skillrl sft --goals 3 --resume"
    assert resume_command(["train", "--resume", "--cycles", "9"]) == (
        "skillrl train --resume --cycles 9"
    )


def test_a_cold_start_into_a_folder_that_holds_a_run_is_refused_before_it_writes(
    workspace, started, monkeypatch
):
    import skillrl_cli.sft as sft_command

    def cold_start(job):  # what the real one does first: write into <run>/sft/
        job.folder.mkdir(parents=True)
        raise Started()

    monkeypatch.setattr(sft_command, "run_cold_start", cold_start)
    run = workspace / "runs" / "tiny"
    run.mkdir(parents=True)
    (run / "state.json").write_text("{}")
    result = train("--run-name", "tiny", "--cold-start")
    assert result.exit_code == 1 and "already holds a run" in result.output, result.output
    assert not (run / "sft").exists() and not started
    # A fresh folder gets its cold start.
    assert isinstance(train("--run-name", "fresh", "--cold-start").exception, Started)
    assert (workspace / "runs" / "fresh" / "sft").is_dir()


@pytest.mark.parametrize("damage", ["delete", "null", "number"])
def test_options_without_their_digest_are_refused_on_resume(workspace, started, damage):
    first = train("--run-name", "r", "--max-prompt-tokens", "1500")
    assert isinstance(first.exception, Started), first.output
    run = workspace / "runs" / "r"
    saved = start(run, started[0], {"cycle": 1})
    saved["options"]["max-prompt-tokens"] = 900  # in no section the resume compares
    if damage == "delete":
        del saved["options_digest"]
    else:
        saved["options_digest"] = None if damage == "null" else 7
    (run / "config.json").write_text(json.dumps(saved))
    result = train("--run-name", "r", "--resume")
    assert result.exit_code == 1, result.output
    assert "have no options_digest" in result.output and "Traceback" not in result.output
    assert len(started) == 1


def test_a_state_beyond_the_saved_cycles_is_refused_on_resume(workspace, started):
    first = train("--run-name", "r", "--cycles", "2")
    assert isinstance(first.exception, Started), first.output
    run = workspace / "runs" / "r"
    start(run, started[0], {"cycle": 1000000})
    result = train("--run-name", "r", "--resume")
    assert result.exit_code == 1 and "beyond the run's 2 cycles" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1
    start(run, started[0], {"cycle": 3, "done": True})  # a finished run of 2 cycles
    assert isinstance(train("--run-name", "r", "--resume").exception, Started)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cycles: 2.5\n", "'cycles': '2.5' is not a valid integer"),  # not 2
        ("eval-goals: 0.9\n", "'eval-goals': '0.9' is not a valid integer"),  # not 0
        ("cycles: true\n", "'cycles': 'true' is not a valid integer"),  # not 1
        ("cycles: 2024-01-01\n", "'cycles' must be a single value, not a date"),
        ("cycles: !!set {a, b}\n", "'cycles' must be a single value, not a set"),
        ("cycles: !!binary aGVsbG8=\n", "'cycles' must be a single value, not binary data"),
        ("estimator: 7\n", "'estimator': '7' is not one of 'grpo', 'rft'"),
        ("learning-rate: 1.0e-4\nlr: 2.0e-4\n", "'learning-rate' and 'lr' both set --learning"),
        ("goals-per-cycle: 2\ngoals_per_cycle: 3\n", "both set --goals-per-cycle"),
        ("cycles: 2\ncycles: 3\n", "duplicate key 'cycles'"),
        ("env: null\n", "'env' needs a value, not null"),  # was None for the env id
        ("resume: true\n", "give --resume on the command line"),
        ("workspace: ws\n", "give --workspace on the command line"),
    ],
)
def test_a_recipe_value_is_checked_as_its_command_line_option(
    workspace, tmp_path, started, text, message
):
    config = tmp_path / "run.yaml"
    config.write_text(text)
    result = train("--config", str(config))
    assert result.exit_code == 2 and message in result.output, result.output
    assert "unknown key" not in result.output and not started
    assert not any(workspace.iterdir())


def test_two_config_files_are_refused(workspace, tmp_path, started):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("cycles: 3\n")
    second.write_text("group-size: 3\n")
    result = train("--config", str(first), "--config", str(second))
    assert result.exit_code == 2 and "given 2 times" in result.output, result.output
    assert not started


def test_values_a_recipe_may_give_reach_the_run_as_typed_on_the_command_line(
    workspace, tmp_path, started
):
    config = tmp_path / "run.yaml"
    config.write_text("cycles: '3'\nlearning-rate: 1\nlora: yes\nthreads: null\nrun-name: 42\n")
    result = train("--config", str(config))
    assert isinstance(result.exception, Started), result.output
    cycle, grpo, settings = started[0]
    assert cycle.cycles == 3 and grpo.learning_rate == 1.0 and grpo.use_peft
    assert settings.folder.name == "42" and settings.policy.threads is None


def _yaml_values():
    import datetime

    from hypothesis import strategies as st

    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**70), max_value=2**70)
        | st.floats()
        | st.text(max_size=12)
        | st.dates()
        | st.datetimes(max_value=datetime.datetime(9999, 1, 1))
        | st.binary(max_size=4)
        | st.sampled_from(["grpo", "rft", "transformers", "tensorboard", "none", "1e-4", "2.5"])
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.text(max_size=6), inner, max_size=3)
            | st.frozensets(st.integers(0, 9), max_size=3).map(set)
        ),
        max_leaves=5,
    )


def _recipe_keys():
    from hypothesis import strategies as st

    from skillrl_cli.train_config import option_keys

    names = sorted(option_keys(train_command.train)) + ["resume", "workspace", "json", "config"]
    return st.sampled_from(names) | st.text(max_size=8)


def test_any_yaml_value_in_any_recipe_key_runs_or_is_refused_in_one_line(
    workspace, tmp_path, monkeypatch
):
    import yaml
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    import skillrl_cli.sft as sft_command

    def stop(*_args, **_kwargs):
        raise Started()

    monkeypatch.setattr(train_command, "run_with_progress", stop)
    monkeypatch.setattr(sft_command, "run_cold_start", stop)  # cold-start: true
    config = tmp_path / "run.yaml"

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.dictionaries(_recipe_keys(), _yaml_values(), min_size=1, max_size=3))
    def check(recipe):
        config.write_text(yaml.dump(recipe))
        result = CliRunner().invoke(main, ["train", "--config", str(config)])
        if isinstance(result.exception, Started):
            return
        assert isinstance(result.exception, SystemExit), repr(result.exception)
        assert result.exit_code in (1, 2) and "Traceback" not in result.output, result.output
        error = result.output[result.output.index("Error: ") :]
        assert error.strip() and "\n" not in error.strip(), result.output

    check()


@pytest.mark.parametrize("flag", ["--init", "--model"])
def test_a_resume_whose_saved_model_is_gone_says_it_came_from_config_json(
    workspace, tmp_path, started, flag
):
    import shutil

    model = tmp_path / "checkpoint"
    whole_checkpoint(model)
    first = train("--run-name", "r", flag, str(model))
    assert isinstance(first.exception, Started), first.output
    run = workspace / "runs" / "r"
    start(run, started[0], {"cycle": 1})
    shutil.rmtree(model)
    result = train("--run-name", "r", "--resume")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    said = " ".join(result.output.split())
    assert f"that {flag} was saved in {run / 'config.json'}, which --resume continues" in said
    assert len(started) == 1


def test_runs_refuses_a_runs_path_that_is_a_file(workspace):
    (workspace / "runs").write_text("not a folder")
    result = CliRunner().invoke(main, ["runs"])
    assert result.exit_code == 1 and "is a file, not the folder" in result.output, result.output
    assert "no training runs" not in result.output
    trained = train("--run-name", "r")
    assert trained.exit_code == 1 and "is not a folder" in trained.output, trained.output


def test_rollout_parallel_reaches_the_run_and_zero_is_refused(workspace, started):
    assert isinstance(train("--run-name", "wide", "--rollout-parallel", "64").exception, Started)
    cycle, _grpo, settings = started[0]
    assert cycle.rollout_parallel == 64 and settings.options["rollout-parallel"] == 64
    refused = train("--run-name", "none", "--rollout-parallel", "0")
    assert refused.exit_code == 2 and "--rollout-parallel" in refused.output
    assert isinstance(train("--run-name", "plain").exception, Started)
    assert started[1][0].rollout_parallel == 16


def test_a_run_saved_before_rollout_parallel_resumes_playing_16_at_once():
    from trainers.common.settings_migration import MIGRATIONS

    assert MIGRATIONS["cycle"].read({"cycles": 3})["rollout_parallel"] == 16
