"""One real GRPO update on the embedded SmolLM2-135M-Instruct (converted checkpoint)."""

from __future__ import annotations

import pytest
import torch
from trainer_helpers import group_episodes

from trainers.update.batching import TurnSample, collate
from trainers.update.config import GRPOConfig
from trainers.update.grpo import GRPOTrainer
from trainers.update.microbatch_loss import compute_logprobs


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
def test_the_prefix_tree_gives_the_plain_loss_and_gradients_on_smollm2(smollm2):
    """A group's first turn (same page), a later turn sharing the system message, and a turn
    whose prompt continues the first: each shared prefix runs once, in two micro-batches."""
    import copy

    from trainers.update.batching import forwarded_positions
    from trainers.update.microbatch_loss import compute_loss, microbatch_loss
    from trainers.update.tree_logprobs import tree_logprobs

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
        TurnSample(
            search + ids("<action>search[shirt]</action>") + results, ids("<action>"), None, 1
        ),
    ]
    pad = tokenizer.pad_token_id or 0
    config = GRPOConfig()
    tree_model, plain_model = copy.deepcopy(model).train(), copy.deepcopy(model).train()
    assert forwarded_positions(samples, share_prefix=True) < 0.6 * forwarded_positions(samples)
    turns = [samples[:2], samples[2:]]
    batches = [collate(t, pad) for t in turns]
    tokens = float(sum(b.num_completion_tokens for b in batches))
    logprobs = tree_logprobs(tree_model, batches, turns)
    out, expected, fresh, expected_fresh = 0.0, 0.0, [], []
    for batch, logprob in zip(batches, logprobs, strict=True):
        mine, mine_fresh = microbatch_loss(batch, config, logprob, num_tokens=tokens)
        theirs, theirs_fresh = compute_loss(plain_model, batch, config, num_tokens=tokens)
        out, expected = out + mine.loss, expected + theirs.loss
        fresh.append(mine_fresh)
        expected_fresh.append(theirs_fresh)
    out.backward()
    expected.backward()
    for a, b in zip(fresh, expected_fresh, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    assert out.item() == pytest.approx(expected.item(), rel=1e-4, abs=1e-6)
    for name in ("model.layers.0.self_attn.q_proj.weight", "model.layers.29.mlp.down_proj.weight"):
        mine = tree_model.get_parameter(name).grad
        theirs = plain_model.get_parameter(name).grad
        assert theirs.abs().sum() > 0
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-3, msg=name)
