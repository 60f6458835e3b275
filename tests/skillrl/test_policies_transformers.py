"""The embedded SmolLM2 for real: conversion once, batched generation, scoring, a short rollout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch

from skillrl.agents.llm import LLMAgent
from skillrl.policies import PolicyConfig, SamplingConfig, load_policy
from skillrl.policies.model_cache import EMBEDDED_NAME, embedded_gguf_path
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine
from skillrl_core.errors import ModelLoadError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model_workspace(tmp_path_factory):
    return tmp_path_factory.mktemp("models-workspace")


@pytest.fixture(scope="module")
def policy(model_workspace):
    return load_policy(PolicyConfig(model="embedded", workspace=model_workspace, dtype="float32"))


def test_embedded_model_is_converted_once_into_a_trainable_checkpoint(
    policy, model_workspace, model_cache, tmp_path
):
    assert embedded_gguf_path().name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    folder = model_cache / "models" / EMBEDDED_NAME  # the per-user cache, not the workspace
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    assert not (model_workspace / "models").exists()
    assert getattr(policy.model, "hf_quantizer", None) is None  # saveable and trainable
    assert [p.name for p in folder.parent.iterdir()] == [EMBEDDED_NAME]  # no temp dir left
    began = time.perf_counter()
    # Another workspace reuses the same conversion.
    again = load_policy(PolicyConfig(model="embedded", workspace=tmp_path, dtype="float32"))
    assert time.perf_counter() - began < 120  # a reload, not a second conversion
    assert torch.equal(again.model.lm_head.weight, policy.model.lm_head.weight)


def test_batched_generation_matches_single_and_reports_logprobs(policy):
    convs = [
        [{"role": "user", "content": "Name one fruit."}],
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
    ]
    sampling = SamplingConfig(max_new_tokens=8)
    batched = policy.generate(convs, sampling)
    alone = policy.generate(convs[1:], sampling)
    assert batched[1].completion_token_ids == alone[0].completion_token_ids  # left padding works
    for gen in batched:
        assert gen.text and len(gen.logprobs) == len(gen.completion_token_ids) <= 8
        assert all(lp <= 0 for lp in gen.logprobs)
    # The reported log-probs are the model's own (greedy: raw logits), token by token.
    gen = batched[0]
    ids = torch.tensor([gen.prompt_token_ids + gen.completion_token_ids])
    with torch.no_grad():
        logprobs = torch.log_softmax(policy.model(ids).logits.float(), dim=-1)[0]
    start = len(gen.prompt_token_ids)
    expected = [logprobs[start - 1 + j, t].item() for j, t in enumerate(gen.completion_token_ids)]
    assert gen.logprobs == pytest.approx(expected, abs=1e-3)


def test_seeded_sampling_repeats(policy):
    conv = [[{"role": "user", "content": "Tell me a color."}]]
    first = policy.generate(conv, SamplingConfig(max_new_tokens=6, temperature=1.0, seed=7))
    second = policy.generate(conv, SamplingConfig(max_new_tokens=6, temperature=1.0, seed=7))
    assert first[0].completion_token_ids == second[0].completion_token_ids


def test_scoring_matches_a_full_forward_pass(policy):
    conv = [{"role": "user", "content": "What is 2+2?"}]
    (scored,) = policy.score_continuations_detailed([conv, conv][:1], [["4", "The answer is 4"]])
    assert scored[0].logprob == pytest.approx(sum(scored[0].token_logprobs))
    for candidate in scored:
        ids = torch.tensor([candidate.prompt_token_ids + candidate.token_ids])
        with torch.no_grad():
            logprobs = torch.log_softmax(policy.model(ids).logits.float(), dim=-1)[0]
        start = len(candidate.prompt_token_ids)
        full = sum(logprobs[start - 1 + j, t].item() for j, t in enumerate(candidate.token_ids))
        assert candidate.logprob == pytest.approx(full, abs=1e-3)


def test_two_real_webshop_turns_with_constrained_decoding(policy):
    engine = RolloutEngine(LLMAgent(policy, constrained=True), config=RolloutConfig(max_turns=2))
    records = engine.run([EpisodeStart("webshop", "test", i, seed=i) for i in range(2)])
    for record in records:
        assert record.num_turns == 2 and record.invalid_actions == 0
        search = record.turns[0]
        assert search.action.startswith("search[") and search.completion_token_ids
        assert len(search.completion_logprobs) == len(search.completion_token_ids)
        assert record.turns[1].action in record.turns[1].available_actions
    assert engine.stats.agent_calls == 2 and engine.stats.generated_tokens > 0


def test_missing_model_folder_is_a_clear_error(model_workspace):
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_policy(PolicyConfig(model="./no/such/model", workspace=model_workspace))


def test_subprocess_run_with_the_embedded_model(model_workspace):
    env = {**os.environ, "SKILLRL_WORKSPACE": str(model_workspace), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "run",
            "--model",
            "base",  # the untrained model itself, not the adapter the package ships
            "--max-turns",
            "1",
            "--constrained",
            "--no-skills",
            "--no-record",
            "--json",
            "--threads",
            "2",
            "--max-prompt-tokens",
            "200",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    episode = json.loads(done.stdout)["episodes"][0]
    assert episode["turns"] == 1 and episode["steps"][0]["action"].startswith("search[")
    assert episode["agent"] == "transformers:embedded" and episode["completion_tokens"] > 0
    # The fixed parts (role, reply format, task, action line) take about 135 tokens; the budget
    # leaves the observation the rest, cut to fit.
    counts = episode["steps"][0]["token_counts"]
    assert counts["observation"] > 0 and sum(counts.values()) <= 200
