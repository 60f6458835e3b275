"""The GRPO update with each micro-batch's shared prompt prefix run once equals the plain one.

Loss, log-probs and the gradient of every trainable parameter must agree with the plain batch
(every row its whole prompt), with and without LoRA, with the k3 KL to a reference; a whole
trainer step must leave the same weights; and a step's samples are grouped by prompt only when
that forwards fewer positions.
"""

from __future__ import annotations

import copy

import pytest
import torch
from test_grpo_head_only import TOLERANCE, lora_with_live_gradients, trainable_grads
from test_grpo_update import PAD, tiny_model
from trainer_helpers import sample_episodes

from trainers.batching import (
    MIN_SHARED_PREFIX,
    TurnSample,
    collate,
    forwarded_positions,
    shared_prefix_length,
    step_batches,
)
from trainers.config import GRPOConfig
from trainers.grpo import GRPOTrainer, compute_logprobs, compute_loss

SYSTEM = list(range(1, 13))  # 12 tokens every prompt starts with


def ids(generator: torch.Generator, n: int) -> list[int]:
    return torch.randint(13, 64, (n,), generator=generator).tolist()


def group_samples(seed: int = 4) -> list[TurnSample]:
    """Two rows with the very same prompt (a group's first turn) and two that share SYSTEM."""
    g = torch.Generator().manual_seed(seed)
    page = SYSTEM + ids(g, 6)
    return [
        TurnSample(page, ids(g, 3), [-3.0, -2.5, -1.0], 1.0),
        TurnSample(page, ids(g, 5), None, -0.5),
        TurnSample(SYSTEM + ids(g, 9), ids(g, 1), [-1.0], 2.0),
        TurnSample(SYSTEM + ids(g, 2), ids(g, 4), [-2.0] * 4, -1.0),
    ]


def test_the_shared_prefix_leaves_every_row_its_last_prompt_token():
    samples = group_samples()
    assert shared_prefix_length(samples) == len(SYSTEM)
    same = samples[:2]
    assert shared_prefix_length(same) == len(same[0].prompt_ids) - 1
    assert shared_prefix_length(samples[:1]) == 0
    short = [TurnSample([1, 2, 3, 4], [5], None, 1.0), TurnSample([1, 2, 3, 9], [5], None, 1.0)]
    assert shared_prefix_length(short) == 0  # under MIN_SHARED_PREFIX: not worth a pass
    assert MIN_SHARED_PREFIX > 3

    batch = collate(samples, PAD, share_prefix=True)
    plain = collate(samples, PAD)
    assert batch.prefix_ids.tolist() == [SYSTEM]
    assert batch.num_tokens == plain.num_tokens == sum(s.num_tokens for s in samples)
    assert batch.input_ids.numel() + len(SYSTEM) < plain.input_ids.numel()
    assert forwarded_positions(samples, share_prefix=True) < forwarded_positions(samples)
    assert torch.equal(batch.completion_ids, plain.completion_ids)


@pytest.mark.parametrize("lora", [False, True])
def test_loss_and_gradients_equal_the_plain_batch(lora):
    config = GRPOConfig(beta=0.05, temperature=0.7, use_peft=lora)
    model = tiny_model(seed=2).train()
    ref_model = tiny_model(seed=5)
    if lora:
        model = lora_with_live_gradients(model, config)
    plain_model = copy.deepcopy(model)
    samples = group_samples()
    shared, plain = collate(samples, PAD, share_prefix=True), collate(samples, PAD)
    tokens = float(plain.num_completion_tokens)
    reference = None if lora else ref_model

    out, fresh = compute_loss(model, shared, config, num_tokens=tokens, ref_model=reference)
    expected, expected_fresh = compute_loss(
        plain_model, plain, config, num_tokens=tokens, ref_model=reference
    )
    out.loss.backward()
    expected.loss.backward()

    assert out.kl > 0
    assert out.loss.item() == pytest.approx(expected.loss.item(), rel=1e-5)
    torch.testing.assert_close(fresh, expected_fresh, **TOLERANCE)
    mine, theirs = trainable_grads(model), trainable_grads(plain_model)
    assert mine.keys() == theirs.keys() and mine
    for name, grad in theirs.items():
        torch.testing.assert_close(mine[name], grad, **TOLERANCE, msg=name)


def test_a_trainer_step_leaves_the_same_weights_and_counts_the_same_tokens():
    config = GRPOConfig(
        learning_rate=1e-2, per_device_train_batch_size=2, gradient_accumulation_steps=2
    )
    samples = group_samples()
    results = []
    for share in (False, True):
        trainer = GRPOTrainer(tiny_model(seed=3).train(), config, pad_token_id=PAD)
        trainer.share_prefix = share
        episodes, advantages = sample_episodes(samples)
        metrics = trainer.train_step(episodes, advantages)
        results.append((metrics, dict(trainer.unwrapped_model.named_parameters())))
    (plain, plain_weights), (shared, shared_weights) = results
    assert shared.total_tokens == plain.total_tokens == sum(s.num_tokens for s in samples)
    assert shared.loss == pytest.approx(plain.loss, rel=1e-5)
    for name, weight in plain_weights.items():
        torch.testing.assert_close(shared_weights[name], weight, atol=1e-5, rtol=1e-4, msg=name)


def test_a_step_groups_equal_prompts_when_that_forwards_less():
    g = torch.Generator().manual_seed(0)
    long_a, long_b = SYSTEM + ids(g, 40), SYSTEM + ids(g, 40)
    # By length the rows pair up a/b; by prompt the two copies of each page share a batch.
    samples = [
        TurnSample(long_a, [20], None, 1.0),
        TurnSample(long_b, [21, 22], None, 1.0),
        TurnSample(long_a, [23, 24, 25], None, 1.0),
        TurnSample(long_b, [26, 27, 28, 29], None, 1.0),
    ]
    generator = torch.Generator().manual_seed(0)
    [(_, shared)] = step_batches(samples, 2, 2, generator, share_prefix=True)
    generator = torch.Generator().manual_seed(0)
    [(_, by_length)] = step_batches(samples, 2, 2, generator)
    assert sorted(len({tuple(s.prompt_ids) for s in batch}) for batch in shared) == [1, 1]
    cost = sum(forwarded_positions(b, True) for b in shared)
    assert cost < sum(forwarded_positions(b, True) for b in by_length)


def test_the_shared_path_is_off_under_several_processes():
    trainer = GRPOTrainer(tiny_model(), GRPOConfig(), pad_token_id=PAD)
    assert trainer.share_prefix  # one process: on by default
    assert not GRPOTrainer(
        tiny_model(), GRPOConfig(share_prompt_prefix=False), pad_token_id=PAD
    ).share_prefix


@pytest.mark.slow
def test_the_compiled_update_shares_the_prefix_too():
    """``torch_compile`` and the shared prefix together take the plain eager step.

    Compiled kernels round differently, and Adam's first step moves near-zero gradients by a
    whole learning rate either way, so the step is compared by its loss, gradient norm and the
    log-probs it leaves, as tests/trainers/test_grpo_compile.py does.
    """
    samples = group_samples()
    results = []
    for compiled, share in ((False, False), (True, True)):
        config = GRPOConfig(
            learning_rate=3e-3,
            per_device_train_batch_size=2,
            gradient_accumulation_steps=2,
            torch_compile=compiled,
        )
        trainer = GRPOTrainer(tiny_model(seed=3).train(), config, pad_token_id=PAD)
        trainer.share_prefix = share
        metrics = trainer.train_step(*sample_episodes(samples))
        trained = trainer.unwrapped_model.eval()
        with torch.no_grad():
            after = compute_logprobs(trained, collate(samples, PAD)).sum(dim=1)
        results.append((metrics, after))
    (eager, eager_after), (fast, fast_after) = results
    assert fast.loss == pytest.approx(eager.loss, rel=1e-4, abs=1e-6)
    assert fast.grad_norm == pytest.approx(eager.grad_norm, rel=1e-4)
    torch.testing.assert_close(fast_after, eager_after, atol=1e-3, rtol=1e-4)
