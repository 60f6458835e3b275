"""The runs of a workspace as ``skillrl runs`` and ``--model auto`` read them (JSON files only)."""

from __future__ import annotations

import json
import os

from trainers.runs import SFT_RUN, TRAIN_RUN, default_models, latest_checkpoint, list_runs


def whole_checkpoint(folder):
    """A folder that passes for a model: config, a (tiny) safetensors file and a tokenizer."""
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    save_file({"weight": np.zeros(1, dtype=np.float32)}, str(folder / "model.safetensors"))


def train_run(workspace, name, env_id, mtime, cycles=2):
    """Write what ``skillrl train`` leaves: state, config with its environment, checkpoints."""
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


def sft_run(workspace, name, env_id, mtime, rounds=2, done=True):
    """Write what ``skillrl sft`` leaves: everything in the run's ``sft/`` folder."""
    root = workspace / "runs" / name / "sft"
    for index in range(rounds):
        checkpoint = root / "checkpoints" / f"round-{index:04d}"
        whole_checkpoint(checkpoint)
    history = [{"round": r, "train.loss": 1.0 / (r + 1)} for r in range(rounds)]
    state = {"round": rounds, "phase": "", "done": done, "history": history, "current": {}}
    (root / "state.json").write_text(json.dumps(state))
    config = {"cold_start": {"env_id": env_id, "dagger_rounds": rounds - 1}, "prompt": {}}
    (root / "config.json").write_text(json.dumps(config))
    os.utime(root / "state.json", (mtime, mtime))
    return root


def test_auto_picks_each_environments_own_newest_model_and_names_the_skipped_runs(tmp_path):
    webshop = train_run(tmp_path, "shop", "webshop", mtime=1_000)
    sokoban = train_run(tmp_path, "boxes", "sokoban", mtime=2_000, cycles=1)
    newest = train_run(tmp_path, "shop-2", "webshop", mtime=3_000, cycles=1)
    for_sokoban = latest_checkpoint(tmp_path, "sokoban")
    assert for_sokoban.checkpoint == sokoban / "checkpoints" / "cycle-0001"
    assert [r.name for r in for_sokoban.skipped] == ["shop-2"]  # newer, but WebShop's
    for_webshop = latest_checkpoint(tmp_path, "webshop")
    assert for_webshop.checkpoint == newest / "checkpoints" / "cycle-0001"
    assert for_webshop.skipped == []
    assert latest_checkpoint(tmp_path, "toy") is None
    assert default_models(tmp_path) == {
        "webshop": newest / "checkpoints" / "cycle-0001",
        "sokoban": sokoban / "checkpoints" / "cycle-0001",
    }
    assert webshop / "checkpoints" / "cycle-0002" not in default_models(tmp_path).values()


def test_an_sft_run_is_listed_with_its_rounds_and_is_its_environments_newest_model(tmp_path):
    train_run(tmp_path, "shop", "webshop", mtime=1_000)
    root = sft_run(tmp_path, "tiny-sft", "webshop", mtime=2_000)
    runs = list_runs(tmp_path)
    assert [(r.name, r.kind, r.env_id) for r in runs] == [
        ("tiny-sft", SFT_RUN, "webshop"),
        ("shop", TRAIN_RUN, "webshop"),
    ]
    sft = runs[0]
    assert (sft.cycles_completed, sft.cycles_planned, sft.done) == (2, 2, True)
    assert sft.checkpoints == [root / "checkpoints" / f"round-{r:04d}" for r in (0, 1)]
    assert latest_checkpoint(tmp_path, "webshop").checkpoint == root / "checkpoints" / "round-0001"


def test_a_train_run_with_a_cold_start_is_one_train_run(tmp_path):
    folder = train_run(tmp_path, "cs", "webshop", mtime=1_000)
    sft_run(tmp_path, "cs", "webshop", mtime=2_000)  # train --cold-start's own sft/ folder
    runs = list_runs(tmp_path)
    assert [(r.name, r.kind) for r in runs] == [("cs", TRAIN_RUN)]
    assert runs[0].last_checkpoint == folder / "checkpoints" / "cycle-0002"


def test_a_run_whose_environment_is_unknown_is_never_played_by_auto(tmp_path):
    folder = train_run(tmp_path, "old-format", "webshop", mtime=2_000)
    (folder / "config.json").write_text('{"cycle": {"cycles": 2}}')  # written before env_id
    found = latest_checkpoint(tmp_path, "webshop")
    assert found is None
    assert list_runs(tmp_path)[0].env_id is None and default_models(tmp_path) == {}


def test_a_run_whose_config_is_damaged_is_skipped_and_never_played_by_auto(tmp_path, caplog):
    folder = train_run(tmp_path, "damaged", "webshop", mtime=2_000)
    (folder / "config.json").write_text("{not json")
    assert latest_checkpoint(tmp_path, "webshop") is None
    assert list_runs(tmp_path) == [] and default_models(tmp_path) == {}
    assert "skipping run damaged" in caplog.text and "config.json" in caplog.text


def test_auto_plays_the_cycle_a_run_chose_and_passes_over_a_run_that_chose_its_start(tmp_path):
    from trainers.cycle.checkpoint_choice import EvaluatedCycle, RunChoice
    from trainers.cycle.run_files import RunFiles

    train_run(tmp_path, "older", "webshop", mtime=1_000, cycles=1)
    chose = train_run(tmp_path, "chose", "webshop", mtime=2_000, cycles=3)
    chosen = RunChoice(2, "checkpoints/cycle-0002", EvaluatedCycle(2, 7, 10, 0.8), "eval")
    RunFiles(chose).save_choice(chosen)
    os.utime(chose / "state.json", (2_000, 2_000))
    assert latest_checkpoint(tmp_path, "webshop").checkpoint == chose / "checkpoints" / "cycle-0002"
    [summary] = [r for r in list_runs(tmp_path) if r.name == "chose"]
    assert summary.chosen_cycle == 2 and summary.to_dict()["played_checkpoint"].endswith("0002")
    # A newer run whose cycles never beat its start leaves nothing: the older run's model plays.
    start = train_run(tmp_path, "start", "webshop", mtime=3_000, cycles=2)
    RunFiles(start).save_choice(RunChoice(0, None, EvaluatedCycle(0, 7, 10, 0.8), "eval"))
    os.utime(start / "state.json", (3_000, 3_000))
    assert latest_checkpoint(tmp_path, "webshop").checkpoint == chose / "checkpoints" / "cycle-0002"
    assert default_models(tmp_path)["webshop"] == chose / "checkpoints" / "cycle-0002"
