"""One real GRPO update on the embedded SmolLM2-135M-Instruct (converted checkpoint)."""

from __future__ import annotations

import pytest
import torch
from trainer_helpers import group_episodes

from trainers.batching import TurnSample, collate
from trainers.config import GRPOConfig
from trainers.grpo import GRPOTrainer, compute_logprobs


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    from skillrl.policies.model_cache import ensure_embedded_checkpoint

    folder = ensure_embedded_checkpoint()  # the test session's cache (tests/conftest.py)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return model, tokenizer


def logprob(model, prompt, completion):
    with torch.no_grad():
        return float(
            compute_logprobs(model, collate([TurnSample(prompt, completion, None, 0)], 0)).sum()
        )


@pytest.mark.slow
def test_one_update_on_smollm2_raises_the_rewarded_action(smollm2):
    model, tokenizer = smollm2
    messages = [
        {
            "role": "user",
            "content": "Task: buy a red cotton t-shirt under 20 dollars.\n"
            "Observation: red cotton t-shirt [SEP] size [SEP] small [SEP] buy now\n"
            "Actions: click[small], click[buy now], click[back to search]",
        }
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
    good = tokenizer("<action>click[small]</action>", add_special_tokens=False)["input_ids"]
    bad = tokenizer("<action>click[back to search]</action>", add_special_tokens=False)["input_ids"]
    before_good, before_bad = logprob(model, prompt, good), logprob(model, prompt, bad)
    episodes = group_episodes(model, prompt, good, bad)
    weight = model.model.layers[3].mlp.down_proj.weight.detach().clone()
    trainer = GRPOTrainer(
        model,
        GRPOConfig(
            learning_rate=1e-5, per_device_train_batch_size=2, gradient_accumulation_steps=1
        ),
        pad_token_id=tokenizer.pad_token_id or 0,
    )
    metrics = trainer.train_step(episodes, [[1.0], [-1.0]])
    model.eval()
    assert metrics.logprob_gap_mean < 1e-3
    assert not torch.equal(weight, model.model.layers[3].mlp.down_proj.weight)
    assert logprob(model, prompt, good) > before_good + 0.1
    assert logprob(model, prompt, bad) < before_bad - 0.1


@pytest.mark.slow
def test_shared_prompt_prefix_gives_the_plain_loss_and_gradients_on_smollm2(smollm2):
    """A group's first turn (same page) and a later turn share the system message: run once."""
    import copy

    from trainers.grpo import compute_loss

    model, tokenizer = smollm2

    def prompt(page: str) -> list[int]:
        messages = [
            {"role": "system", "content": "You are a web shopping agent. Buy what the task asks."},
            {"role": "user", "content": f"Task: buy a red cotton t-shirt.\nObservation: {page}"},
        ]
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    search, results = prompt("search page"), prompt("red cotton t-shirt [SEP] $12 [SEP] next")
    samples = [
        TurnSample(search, ids("<action>search[red cotton t-shirt]</action>"), None, 1.0),
        TurnSample(search, ids("<action>search[shirt]</action>"), None, -1.0),
        TurnSample(results, ids("<action>click[red cotton t-shirt]</action>"), None, 0.5),
    ]
    pad = tokenizer.pad_token_id or 0
    config = GRPOConfig()
    shared_model, plain_model = copy.deepcopy(model).train(), copy.deepcopy(model).train()
    shared, plain = collate(samples, pad, share_prefix=True), collate(samples, pad)
    assert shared.prefix_ids is not None and shared.prefix_ids.shape[1] > 20
    tokens = float(plain.num_completion_tokens)
    out, fresh = compute_loss(shared_model, shared, config, num_tokens=tokens)
    expected, expected_fresh = compute_loss(plain_model, plain, config, num_tokens=tokens)
    out.loss.backward()
    expected.loss.backward()
    torch.testing.assert_close(fresh, expected_fresh, atol=1e-4, rtol=1e-4)
    assert out.loss.item() == pytest.approx(expected.loss.item(), rel=1e-4, abs=1e-6)
    for name in ("model.layers.0.self_attn.q_proj.weight", "model.layers.29.mlp.down_proj.weight"):
        mine = shared_model.get_parameter(name).grad
        theirs = plain_model.get_parameter(name).grad
        assert theirs.abs().sum() > 0
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-3, msg=name)
