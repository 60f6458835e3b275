"""``skillrl sft`` and ``skillrl train --cold-start / --init`` end to end on a tiny model."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from tiny_checkpoint import write_tiny_checkpoint
from transformers import AutoModelForCausalLM

from cli import main


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "model")


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_sft_help_documents_every_option():
    result = invoke("sft", "--help")
    assert result.exit_code == 0
    for option in (
        "--goals",
        "--dagger-rounds",
        "--epochs",
        "--lr",
        "--lora",
        "--skills",
        "--source",
        "--resume",
        "--run-name",
        "--max-prompt-tokens",
    ):
        assert option in result.output


def test_sft_refuses_test_goals(tmp_path, tiny_model_dir):
    result = CliRunner().invoke(
        main,
        ["sft", "--split", "test", "--model", str(tiny_model_dir), "--workspace", str(tmp_path)],
    )
    assert result.exit_code != 0 and "only training goals" in result.output


def test_sft_then_train_from_it(tmp_path, tiny_model_dir):
    ws = str(tmp_path / "ws")
    common = ["--workspace", ws, "--model", str(tiny_model_dir), "--no-skills", "--threads", "1"]
    sft = ["sft", "--goals", "2", "--max-turns", "6", "--epochs", "1", "--run-name", "s"]
    first = invoke(*sft, "--json", *common)
    assert first.exit_code == 0, first.output
    history = json.loads(first.stdout)
    assert [row["round"] for row in history] == [0] and history[0]["train.global_step"] >= 1
    screen = " ".join(first.stderr.split())
    assert "episodes 2/2" in screen  # gathering showed its episodes as they finished
    assert re.search(r"optimizer steps, loss \d+\.\d{4} \d+/\d+", screen), screen  # its loss
    examples, loss = history[0]["train.examples"], history[0]["train.loss"]
    assert (
        f"1 round; the last trained on {examples} examples at a mean loss of {loss:.4f}" in screen
    )
    folder = tmp_path / "ws" / "runs" / "s" / "sft"
    # It opened with what it would do: model, environment, rounds, folder.
    assert f"model: {tiny_model_dir}" in screen and "environment: webshop" in screen
    assert "cold start: behaviour cloning on 2 training goals" in screen
    assert f"run: s in {folder}" in screen
    checkpoint = folder / "checkpoints" / "round-0000"
    AutoModelForCausalLM.from_pretrained(checkpoint)  # a plain from_pretrained checkpoint
    dataset = (folder / "dataset.jsonl").read_bytes()

    again = invoke(*sft, *common)
    assert again.exit_code != 0 or "already holds" in again.output
    resumed = invoke(*sft, "--resume", *common)
    assert resumed.exit_code == 0 and "already done" in resumed.output
    assert (folder / "dataset.jsonl").read_bytes() == dataset

    both = CliRunner().invoke(main, ["train", "--cold-start", "--init", str(checkpoint), *common])
    assert both.exit_code != 0 and "pick one" in both.output
    bogus = CliRunner().invoke(main, ["train", "--init", str(tmp_path), *common])
    assert bogus.exit_code != 0 and "not a checkpoint folder" in bogus.output


@pytest.mark.slow
def test_train_cold_start_runs_the_sft_phase_first(tmp_path, tiny_model_dir):
    ws = str(tmp_path / "ws")
    args = [
        "train",
        "--cold-start",
        "--cold-start-goals",
        "2",
        "--dagger-rounds",
        "1",
        "--dagger-goals",
        "1",
        "--dagger-keep",
        "all",
        "--dagger-replay",
        "1",
        "--sft-lora-layers",
        "1",
        "--sft-epochs",
        "1",
        "--cycles",
        "1",
        "--goals-per-cycle",
        "1",
        "--group-size",
        "2",
        "--eval-goals",
        "1",
        "--max-turns",
        "6",
        "--max-new-tokens",
        "4",
        "--run-name",
        "cs",
        "--workspace",
        ws,
        "--model",
        str(tiny_model_dir),
        "--no-skills",
        "--threads",
        "1",
        "--constrained",
    ]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    run = tmp_path / "ws" / "runs" / "cs"
    sft_state = json.loads((run / "sft" / "state.json").read_text())
    assert sft_state["done"] and [r["round"] for r in sft_state["history"]] == [0, 1]
    recorded = json.loads((run / "sft" / "config.json").read_text())["cold_start"]
    assert (recorded["dagger_keep"], recorded["dagger_replay"], recorded["lora_layers"]) == (
        "all",
        1.0,
        1,
    )
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["cycle"] for r in rows] == [0, 1]
    resumed = invoke(*args, "--resume")
    assert resumed.exit_code == 0 and "already done" in resumed.output


class Killed(Exception):
    pass


def test_sft_killed_mid_way_and_resumed_ends_like_an_uninterrupted_run(
    tmp_path, tiny_model_dir, monkeypatch
):
    import trainers.cold_start.cold_start as cold_start

    args = [
        "sft",
        "--goals",
        "3",
        "--dagger-rounds",
        "1",
        "--dagger-goals",
        "2",
        "--max-turns",
        "6",
        "--epochs",
        "2",
        "--batch-size",
        "2",
        "--grad-accum",
        "1",
        "--save-steps",
        "3",
        "--no-skills",
        "--model",
        str(tiny_model_dir),
        "--threads",
        "1",
        "--run-name",
        "k",
        "--json",
    ]
    straight = invoke(*args, "--workspace", str(tmp_path / "a"))
    assert straight.exit_code == 0, straight.output

    real = cold_start.train_round

    def killed_in_round_one(*positional, on_save=None, **named):
        def save(step):
            on_save(step)
            if positional[4].name == "round-0001":  # the round's trainer folder
                raise Killed

        return real(*positional, on_save=save, **named)

    monkeypatch.setattr(cold_start, "train_round", killed_in_round_one)
    with pytest.raises(Killed):
        invoke(*args, "--workspace", str(tmp_path / "b"))
    monkeypatch.setattr(cold_start, "train_round", real)
    resumed = invoke(*args, "--resume", "--workspace", str(tmp_path / "b"))
    assert resumed.exit_code == 0, resumed.output

    def files(ws):
        return ws / "runs" / "k" / "sft"

    assert (files(tmp_path / "b") / "dataset.jsonl").read_bytes() == (
        files(tmp_path / "a") / "dataset.jsonl"
    ).read_bytes()
    steps = [row["train.global_step"] for row in json.loads(resumed.stdout)]
    assert steps == [row["train.global_step"] for row in json.loads(straight.stdout)]
    assert steps[1] > 3


def test_sft_takes_env_options_and_refuses_a_wrong_key_before_loading_a_model(tmp_path):
    # A model path that does not exist: reaching the model load would fail differently.
    result = CliRunner().invoke(
        main,
        ["sft", "--env", "sokoban", "--env-option", "room_colour=red", "--model",
         str(tmp_path / "no-model"), "--workspace", str(tmp_path / "ws")],
    )  # fmt: skip
    assert result.exit_code != 0
    assert "room_colour" in result.output and "categories" in result.output, result.output
    assert "no-model" not in result.output
