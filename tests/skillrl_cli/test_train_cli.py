from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner
from tiny_checkpoint import write_tiny_checkpoint

from cli import main


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "model")


def invoke(*args):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result


@pytest.mark.slow
def test_train_runs_resumes_with_more_cycles_and_eval_reads_the_checkpoint(
    tmp_path, tiny_model_dir
):
    ws = str(tmp_path / "ws")
    common = [
        "--workspace",
        ws,
        "--model",
        str(tiny_model_dir),
        "--no-skills",
        "--goals-per-cycle",
        "1",
        "--group-size",
        "2",
        "--eval-goals",
        "1",
        "--max-turns",
        "2",
        "--max-new-tokens",
        "4",
        "--run-name",
        "smoke",
        "--threads",
        "1",
    ]
    first = invoke("train", "--cycles", "1", *common)
    assert first.exit_code == 0, first.output
    run = tmp_path / "ws" / "runs" / "smoke"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["cycle"] for r in rows] == [0, 1]
    assert rows[1]["train.episodes"] >= 2 and rows[1]["eval.episodes"] == 1
    assert (run / "checkpoints" / "cycle-0001" / "model.safetensors").exists()
    assert (run / "learning_curve.png").exists()

    # --resume takes every setting but --cycles from the run's config.json.
    where = ["--workspace", ws, "--run-name", "smoke"]
    more = invoke("train", "--cycles", "2", "--resume", "--json", *where)
    assert more.exit_code == 0, more.output
    history = json.loads(more.stdout)
    assert [r["cycle"] for r in history] == [0, 1, 2]
    listed = json.loads(invoke("runs", "--workspace", ws, "--json").stdout)
    assert [(r["name"], r["cycles_completed"], r["done"]) for r in listed] == [("smoke", 2, True)]
    assert listed[0]["last_checkpoint"] == str(run / "checkpoints/cycle-0002")

    result = invoke(
        "eval",
        "--workspace",
        ws,  # no --model: the newest trained checkpoint
        "--skills",
        "off",
        "--goals",
        "2",
        "--samples",
        "2",
        "--k",
        "1,2",
        "--t",
        "1,2",
        "--max-turns",
        "2",
        "--max-new-tokens",
        "4",
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert f"model: {run / 'checkpoints/cycle-0002'}" in result.stderr
    report = json.loads(result.stdout)["arms"]
    assert len(report) == 1 and report[0]["skills"] is False
    assert report[0]["greedy"]["episodes"] == 2
    assert set(report[0]["pass_at"]) == {"1,1", "1,2", "2,1", "2,2"}
    assert report[0]["timings"]["per_turn"]["model"] > 0


@pytest.mark.slow
def test_a_run_from_a_model_recorded_without_skills_resumes(tmp_path, tiny_model_dir):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    settings = {"env_id": "webshop", "skills": False, "max_prompt_tokens": 512,
                "constrained": True, "env_options": {}}  # fmt: skip
    (model / "skillrl.json").write_text(json.dumps(settings))
    where = ["--workspace", str(tmp_path / "ws"), "--run-name", "r"]
    small = ["--goals-per-cycle", "1", "--group-size", "2", "--eval-goals", "1", "--max-turns",
             "2", "--max-new-tokens", "4", "--threads", "1"]  # fmt: skip
    first = invoke("train", "--model", str(model), "--cycles", "1", *small, *where)
    assert first.exit_code == 0, first.output
    saved = json.loads((tmp_path / "ws" / "runs" / "r" / "config.json").read_text())["cycle"]
    assert saved["skills"] is False and saved["distill"] is False  # taken from skillrl.json
    more = invoke("train", "--cycles", "2", "--resume", *where)
    assert more.exit_code == 0, more.output


def test_bad_options_give_one_clear_line(tmp_path):
    ws = str(tmp_path / "ws")
    result = invoke("train", "--workspace", ws, "--backend", "vllm")
    assert result.exit_code == 1
    assert "cannot train" in result.output and "Traceback" not in result.output
    result = invoke("eval", "--workspace", ws, "--samples", "1", "--k", "2")
    assert result.exit_code == 1 and "must not exceed samples" in result.output
    result = invoke("eval", "--workspace", ws, "--t", "five")
    assert result.exit_code == 2 and "comma-separated" in result.output


def test_a_resumed_progress_bar_starts_at_the_phases_already_done():
    from skillrl_cli.train_session import phases_done as _phases_done
    from trainers.cycle.config import CycleConfig
    from trainers.cycle.run_files import RunState

    two = CycleConfig(cycles=2)
    assert _phases_done(RunState(), two) == 0
    # Cycle 0 (eval, save) and cycle 1's rollout and distill are done: 4 of 2 + 6 * 2 phases.
    assert _phases_done(RunState(cycle=1, phase="distill"), two) == 4
    assert _phases_done(RunState(cycle=3, done=True), two) == 14
    # With --eval-every 2 of 3 cycles, cycle 1 has no eval: 2 + 5 + 6 + 6 phases in all.
    assert _phases_done(RunState(cycle=4, done=True), CycleConfig(cycles=3, eval_every=2)) == 19


@pytest.mark.slow
def test_the_rft_recipe_loads_and_a_one_cycle_tiny_version_runs_offline(tmp_path, tiny_model_dir):
    from skillrl_cli.train_config import RECIPES

    recipe = RECIPES / "webshop-rft.yaml"
    ws = str(tmp_path / "ws")
    tiny = ["--model", str(tiny_model_dir), "--cycles", "1", "--goals-per-cycle", "1",
            "--group-size", "2", "--eval-goals", "1", "--eval-every", "1",
            "--validation-goals", "0", "--test-goals", "1", "--max-turns", "2",
            "--max-new-tokens", "4", "--threads", "1"]  # fmt: skip
    result = invoke("train", "--config", str(recipe), "--workspace", ws, *tiny)
    assert result.exit_code == 0, result.output
    run = tmp_path / "ws" / "runs" / "webshop-rft"  # the recipe names its run
    saved = json.loads((run / "config.json").read_text())
    assert saved["grpo"]["estimator"] == "rft" and saved["grpo"]["use_peft"] is True
    assert saved["cycle"]["dynamic_sampling"] is False and saved["cycle"]["skills"] is True
    assert saved["options"]["learning-rate"] == 2e-4
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["cycle"] for r in rows] == [0, 1] and rows[1]["train.episodes"] == 2
    # The recipe chooses its cycle on eval-split goals and plays test goals only around it.
    assert saved["cycle"]["eval_split"] == "eval" and (run / "best.json").exists()
    assert "chosen: cycle " in result.output and "test goals: " in result.output
    played = sorted(p.parent.name for p in run.glob("cycles/*/test.json"))
    assert played[0] == "0000" and len(played) <= 2


@pytest.mark.slow
def test_a_train_checkpoint_records_its_settings_and_run_replays_them(
    tmp_path, tiny_model_dir, monkeypatch
):
    import skillrl_cli.run

    ws = str(tmp_path / "ws")
    tiny = ["--model", str(tiny_model_dir), "--cycles", "1", "--goals-per-cycle", "1",
            "--group-size", "2", "--eval-goals", "1", "--validation-goals", "0",
            "--max-turns", "2", "--max-new-tokens", "4", "--threads", "1", "--no-skills",
            "--max-prompt-tokens", "700", "--env-option", "observation_mode=text_rich",
            "--run-name", "recorded", "--workspace", ws]  # fmt: skip
    trained = invoke("train", *tiny)
    assert trained.exit_code == 0, trained.output
    lines = trained.output.splitlines()  # off a terminal: plain lines, the update's counter too
    assert "[4/8 phases, " in trained.output and "] cycle 1: GRPO update" in trained.output
    assert any(line.startswith("turns trained 4/4, ") for line in lines), trained.output
    checkpoint = tmp_path / "ws" / "runs" / "recorded" / "checkpoints" / "cycle-0001"
    recorded = json.loads((checkpoint / "skillrl.json").read_text())
    assert recorded["env_id"] == "webshop" and recorded["skills"] is False
    assert recorded["max_prompt_tokens"] == 700 and recorded["constrained"] is True
    assert recorded["env_options"] == {"observation_mode": "text_rich"}
    assert recorded["figures"]["test_goals"] == 1  # cycle 1 evaluated its one test goal
    config = checkpoint.parents[1] / "config.json"  # the run's settings, which made it
    assert recorded["recipe"] == f"skillrl train --config {config} --cycles 1"

    played = []

    def capture(settings, console, *_display):
        played.append(settings)
        raise KeyboardInterrupt  # stop before playing

    monkeypatch.setattr(skillrl_cli.run, "play_on_screen", capture)
    result = CliRunner().invoke(main, ["run", "--model", str(checkpoint), "--workspace", ws])
    said = " ".join(result.output.split())
    assert "settings the model was trained under: no skills, 700-token prompts, constrained " \
        "decoding, observation_mode=text_rich" in said, said  # fmt: skip
    assert played and played[0].skills is False


@pytest.mark.slow
def test_a_lora_run_saves_adapters_and_merged_models_only_when_asked(tmp_path, tiny_model_dir):
    import torch

    from skillrl.policies.transformers_loading import load_causal_lm

    ws = str(tmp_path / "ws")
    tiny = ["--model", str(tiny_model_dir), "--goals-per-cycle", "1", "--group-size", "2",
            "--eval-goals", "1", "--validation-goals", "0", "--max-turns", "2",
            "--max-new-tokens", "4", "--threads", "1", "--no-skills", "--lora",
            "--learning-rate", "1e-2", "--run-name", "lora", "--workspace", ws]  # fmt: skip
    first = invoke("train", "--cycles", "1", *tiny)
    assert first.exit_code == 0, first.output
    checkpoints = tmp_path / "ws" / "runs" / "lora" / "checkpoints"
    adapter = checkpoints / "cycle-0001"
    assert (adapter / "adapter_model.safetensors").exists() and (adapter / "skillrl.json").exists()
    assert not (adapter / "model.safetensors").exists()  # megabytes, not the whole model
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(tiny_model_dir)  # the starting model
    # A resume may ask for whole models from now on (how checkpoints are written changes no
    # result), and the two load alike where the weights are the same.
    more = invoke("train", "--cycles", "2", "--resume", "--merged-checkpoints", *tiny)
    assert more.exit_code == 0, more.output
    merged = checkpoints / "cycle-0002"
    assert (merged / "model.safetensors").exists() and not (merged / "adapter_config.json").exists()
    _, base = load_causal_lm(str(tiny_model_dir), torch.float32)
    _, trained = load_causal_lm(str(adapter), torch.float32)
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        assert not torch.allclose(base(input_ids=ids).logits, trained(input_ids=ids).logits)
    listed = json.loads(invoke("runs", "--workspace", ws, "--json").stdout)
    assert [str(p) for p in [adapter, merged]] == listed[0]["checkpoints"]


def test_two_runs_with_the_same_seed_end_with_the_same_weights_bit_for_bit(
    tmp_path, tiny_model_dir
):
    """LoRA's initial weights come from torch's global generator, which a run seeds itself: the
    second run in this process starts where the first left the generator."""
    from safetensors.torch import load_file

    weights = []
    for name in ("first", "second"):
        ws = tmp_path / name
        result = invoke(
            "train", "--workspace", str(ws), "--model", str(tiny_model_dir), "--no-skills",
            "--cycles", "1", "--goals-per-cycle", "1", "--group-size", "2", "--eval-goals", "1",
            "--max-turns", "2", "--max-new-tokens", "4", "--threads", "1", "--run-name", "r",
            "--use-peft", "--seed", "5",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        weights.append(load_file(ws / "runs/r/trainer_state/trainable.safetensors"))
    first, second = weights
    assert first.keys() == second.keys() and any("lora_A" in k for k in first)
    assert all(torch.equal(first[k], second[k]) for k in first)
