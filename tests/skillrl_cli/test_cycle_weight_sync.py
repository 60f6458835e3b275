"""The cycle pushes trained weights to a rollout policy that has ``sync_weights`` (trl-vllm).

The rollout server itself needs a GPU, so the rollout policy here is the scripted fake that
records each sync; the trainer, the GRPO update and the run files are real.
"""

from __future__ import annotations

import pytest
import torch
from fake_policy import ScriptedPolicy

from trainers.common.phased_run import PhaseSaved, PhaseStarted, RunEvents
from trainers.common.policy_rollouts import PolicyRollouts
from trainers.cycle.config import CycleConfig
from trainers.cycle.cycle import TrainingRun
from trainers.cycle.run_files import CyclePhase
from trainers.update.config import GRPOConfig

CONFIG = CycleConfig(
    cycles=1,
    goals_per_cycle=1,
    group_size=2,
    eval_goals=1,
    max_turns=2,
    max_new_tokens=24,
    seed=1,
    max_topup_rounds=0,
    dynamic_sampling=False,
    skills=False,
    distill=False,
    evolve=False,
)
GRPO = GRPOConfig(learning_rate=1e-2, per_device_train_batch_size=8, gradient_accumulation_steps=1)


class ServedPolicy(ScriptedPolicy):
    """Scripted rollouts from "another process", recording every weight sync in ``events``."""

    def __init__(self, events: list) -> None:
        super().__init__()
        self.events = events
        self.synced: list[tuple[object, dict[str, torch.Tensor]]] = []

    def sync_weights(self, model) -> float:
        self.events.append("sync")
        state = {n: p.detach().clone() for n, p in model.named_parameters()}
        self.synced.append((model, state))
        return 0.25


def open_run(run_dir, events):
    trained = ScriptedPolicy()  # the in-process model GRPO updates
    served = ServedPolicy(events)
    runner = PolicyRollouts(served, max_turns=CONFIG.max_turns, max_new_tokens=24)

    def started(event):
        events.append(event)
        if event.phase is CyclePhase.UPDATE:
            # A scripted group may carry no gradient; this marks the weights the update saves.
            with torch.no_grad():
                trained.model.model.norm.weight.add_(1.0)

    watched = RunEvents().on(PhaseStarted, started).on(PhaseSaved, events.append)
    run = TrainingRun(CONFIG, GRPO, policy=trained, runner=runner, run_dir=run_dir, events=watched)
    return run, served


def test_weights_are_synced_at_start_and_after_each_update_before_eval(tmp_path):
    events: list = []
    run, served = open_run(tmp_path / "run", events)
    state = run.run()
    first_eval = events.index(PhaseStarted(0, CyclePhase.EVAL))
    assert events.index("sync") < first_eval  # start: before any rollout
    after = events.index(PhaseSaved(1, CyclePhase.UPDATE)) + 1
    assert events[after] == "sync" and events.index(PhaseStarted(1, CyclePhase.EVAL)) > after
    assert events.count("sync") == 2
    assert all(model is run.trainer.unwrapped_model for model, _ in served.synced)
    final = {n: p.detach() for n, p in run.trainer.unwrapped_model.named_parameters()}
    assert all(torch.equal(final[n], t) for n, t in served.synced[-1][1].items())
    start, updated = (weights["model.norm.weight"] for _, weights in served.synced)
    assert not torch.equal(start, updated)
    assert state.history[-1]["update.sync_seconds"] == 0.25

    # On resume the server gets the resumed (trained) weights, not the fresh model's.
    resumed_events: list[str] = []
    resumed, served_again = open_run(tmp_path / "run", resumed_events)
    resumed.run(resume=True)
    assert resumed_events.count("sync") == 1
    ((_, weights),) = served_again.synced
    assert all(torch.equal(weights[n], t) for n, t in served.synced[-1][1].items())
    assert not torch.equal(weights["model.norm.weight"], start)


def test_an_in_process_policy_is_not_synced(tmp_path):
    policy = ScriptedPolicy()
    runner = PolicyRollouts(policy, max_turns=2, max_new_tokens=24)
    run = TrainingRun(CONFIG, GRPO, policy=policy, runner=runner, run_dir=tmp_path / "r")
    assert run._sync_rollout_weights() is None


class FakeServer:
    """Stands in for TRL's ``VLLMClient`` in the CLI smoke test (no GPU here)."""

    tokenizer = None
    instances: list[FakeServer] = []

    def __init__(self, base_url=None, connection_timeout=0.0):
        self.base_url = base_url
        self.calls: list[str] = []
        FakeServer.instances.append(self)

    def generate(self, prompts, max_tokens=16, **unused):
        self.calls.append("generate")
        text = "<think>go</think><action>search[red shirt]</action>"
        ids = self.tokenizer.encode(text, add_special_tokens=False)[:max_tokens]
        return {
            "prompt_ids": prompts,
            "completion_ids": [list(ids) for _ in prompts],
            "logprobs": [[[-1.0] for _ in ids] for _ in prompts],
            "logprob_token_ids": [[[t] for t in ids] for _ in prompts],
        }

    def init_communicator(self, device=0):
        self.calls.append("init_communicator")

    def update_model_params(self, model):
        self.calls.append("update_model_params")

    def reset_prefix_cache(self):
        self.calls.append("reset_prefix_cache")

    def close_communicator(self):
        self.calls.append("close_communicator")


def invoke(*args):
    from click.testing import CliRunner

    from cli import main

    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_train_cli_checks_the_server_options_in_one_line(tmp_path):
    ws = str(tmp_path / "ws")
    result = invoke("train", "--workspace", ws, "--backend", "trl-vllm")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "base_url is required for backend 'trl-vllm'" in result.output
    result = invoke("train", "--workspace", ws, "--base-url", "http://127.0.0.1:8000")
    assert result.exit_code == 1 and "only used with --backend trl-vllm" in result.output
    help_text = invoke("train", "--help").output
    assert "--base-url" in help_text and "trl vllm-serve" in help_text


def test_adapter_sync_needs_the_server_backend_and_a_lora_update(tmp_path):
    ws = str(tmp_path / "ws")
    result = invoke("train", "--workspace", ws, "--adapter-sync")
    assert result.exit_code == 1 and "--adapter-sync is only used with --backend trl-vllm" in (
        result.output
    )
    server = ["--backend", "trl-vllm", "--base-url", "http://127.0.0.1:8000", "--adapter-sync"]
    result = invoke("train", "--workspace", ws, *server)
    assert result.exit_code == 1 and "add --use-peft" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "ws" / "runs").exists()
    assert "--adapter-sync" in invoke("train", "--help").output


@pytest.mark.slow
def test_train_cli_rolls_out_through_the_server_and_syncs(tmp_path, monkeypatch):
    from tiny_checkpoint import write_tiny_checkpoint
    from transformers import AutoTokenizer

    from skillrl.policies import trl_vllm_backend

    model_dir = write_tiny_checkpoint(tmp_path / "model")
    FakeServer.tokenizer = AutoTokenizer.from_pretrained(model_dir)
    FakeServer.instances.clear()
    monkeypatch.setattr(trl_vllm_backend, "import_vllm_client", lambda: FakeServer)
    result = invoke(
        "train", "--workspace", str(tmp_path / "ws"), "--model", str(model_dir),
        "--backend", "trl-vllm", "--base-url", "http://127.0.0.1:8000", "--no-skills",
        "--cycles", "1", "--goals-per-cycle", "1", "--group-size", "2", "--eval-goals", "1",
        "--max-turns", "2", "--max-new-tokens", "8", "--no-dynamic-sampling", "--threads", "1",
        "--free",  # the stand-in server generates but cannot score candidates
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (server,) = FakeServer.instances
    assert server.base_url == "http://127.0.0.1:8000"
    assert server.calls.count("init_communicator") == 1
    assert server.calls.count("update_model_params") == 2  # at start, after the update
    assert server.calls.count("reset_prefix_cache") == 2
    assert "generate" in server.calls and server.calls[-1] == "close_communicator"


@pytest.mark.slow
def test_train_cli_sends_only_the_adapter_after_each_update(tmp_path, monkeypatch):
    from lora_endpoints import Recorder, lora_server
    from tiny_checkpoint import write_tiny_checkpoint
    from transformers import AutoTokenizer

    from skillrl.policies import trl_vllm_backend

    model_dir = write_tiny_checkpoint(tmp_path / "model")
    FakeServer.tokenizer = AutoTokenizer.from_pretrained(model_dir)
    FakeServer.instances.clear()
    monkeypatch.setattr(trl_vllm_backend, "import_vllm_client", lambda: FakeServer)
    with lora_server() as url:
        result = invoke(
            "train", "--workspace", str(tmp_path / "ws"), "--model", str(model_dir),
            "--backend", "trl-vllm", "--base-url", url, "--adapter-sync", "--use-peft",
            "--no-skills", "--cycles", "1", "--goals-per-cycle", "1", "--group-size", "2",
            "--eval-goals", "1", "--max-turns", "2", "--max-new-tokens", "8",
            "--no-dynamic-sampling", "--threads", "1", "--free",
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    (server,) = FakeServer.instances
    paths = [path for path, _ in Recorder.requests]
    assert paths == [  # at the start, then after the update
        "/v1/load_lora_adapter",
        "/v1/load_lora_adapter",
        "/v1/unload_lora_adapter",
    ]
    assert server.model == Recorder.requests[1][1]["lora_name"]
    assert "generate" in server.calls
    assert not {"init_communicator", "update_model_params", "reset_prefix_cache"} & set(
        server.calls
    )
