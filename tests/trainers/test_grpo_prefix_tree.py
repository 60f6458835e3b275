"""The GRPO update run as a prefix tree (each shared prefix once) equals the plain one.

Loss, log-probs and the gradient of every trainable parameter must agree with the plain batches
(every row its whole prompt), with and without LoRA, with the k3 KL to a reference; a whole
trainer step must leave the same weights; a step's samples are grouped by prompt when that
forwards fewer positions, and its micro-batches share a tree only within the plain path's memory.
"""

from __future__ import annotations

import copy

import pytest
import torch
from test_grpo_head_only import TOLERANCE, lora_with_live_gradients, trainable_grads
from test_grpo_update import PAD, tiny_model
from trainer_helpers import sample_episodes

from trainers.update.batching import (
    TurnSample,
    collate,
    forwarded_positions,
    step_batches,
    tree_runs,
)
from trainers.update.config import GRPOConfig
from trainers.update.grpo import GRPOTrainer
from trainers.update.microbatch_loss import (
    RowForward,
    compute_loss,
    microbatch_loss,
    reference_policy,
)
from trainers.update.tree_logprobs import PrefixTreeForward

SYSTEM = list(range(1, 13))  # 12 tokens every prompt starts with


def ids(generator: torch.Generator, n: int) -> list[int]:
    return torch.randint(13, 64, (n,), generator=generator).tolist()


def group_samples(seed: int = 4) -> list[TurnSample]:
    """Two rows with the very same prompt (a group's first turn), two that share SYSTEM, and
    one whose prompt continues the first row (the next turn of its episode)."""
    g = torch.Generator().manual_seed(seed)
    page = SYSTEM + ids(g, 6)
    first = TurnSample(page, ids(g, 3), [-3.0, -2.5, -1.0], 1.0)
    return [
        first,
        TurnSample(page, ids(g, 5), None, -0.5),
        TurnSample(SYSTEM + ids(g, 9), ids(g, 1), [-1.0], 2.0),
        TurnSample(SYSTEM + ids(g, 2), ids(g, 4), [-2.0] * 4, -1.0),
        TurnSample(page + first.completion_ids + ids(g, 5), ids(g, 2), [-1.0, -0.5], 0.5),
    ]


def test_the_tree_forwards_each_shared_prefix_once_but_copies_a_short_one():
    samples = group_samples()
    plain = forwarded_positions(samples)
    tree = forwarded_positions(samples, share_prefix=True)
    distinct = {
        tuple((s.prompt_ids + s.completion_ids[:-1])[: i + 1])
        for s in samples
        for i in range(s.num_tokens - 1)
    }
    # the group's page and one more prompt agree on a token after SYSTEM: it runs in each branch
    assert len(distinct) < tree < sum(s.num_tokens for s in samples) < plain


@pytest.mark.parametrize("lora", [False, True])
def test_loss_and_gradients_equal_the_plain_batch(lora):
    config = GRPOConfig(beta=0.05, temperature=0.7, use_peft=lora)
    model = tiny_model(seed=2).train()
    ref_model = tiny_model(seed=5)
    if lora:
        model = lora_with_live_gradients(model, config)
    plain_model = copy.deepcopy(model)
    samples = group_samples()
    turns = [samples[:3], samples[3:]]  # two micro-batches
    batches = [collate(t, PAD) for t in turns]
    tokens = float(sum(b.num_completion_tokens for b in batches))
    reference = None if lora else ref_model

    def tree(m):
        return PrefixTreeForward().logprobs(m, batches, turns, config.temperature)

    logprobs = tree(model)
    with torch.no_grad():  # the reference model, or with LoRA the model without its adapter
        refs = reference_policy(model, reference, tree)

    total, expected_total = 0.0, 0.0
    for i, batch in enumerate(batches):
        out, fresh = microbatch_loss(
            batch, config, logprobs[i], ref_logprobs=refs[i], num_tokens=tokens
        )
        expected, expected_fresh = compute_loss(
            plain_model, batch, config, num_tokens=tokens, ref_model=reference
        )
        assert out.kl > 0
        assert out.loss.item() == pytest.approx(expected.loss.item(), rel=1e-5)
        torch.testing.assert_close(fresh, expected_fresh, **TOLERANCE)
        total, expected_total = total + out.loss, expected_total + expected.loss
    total.backward()
    expected_total.backward()
    mine, theirs = trainable_grads(model), trainable_grads(plain_model)
    assert mine.keys() == theirs.keys() and mine
    for name, grad in theirs.items():
        torch.testing.assert_close(mine[name], grad, **TOLERANCE, msg=name)


def test_a_trainer_step_leaves_the_same_weights_and_counts_the_same_tokens():
    config = GRPOConfig(
        learning_rate=1e-2, per_device_train_batch_size=2, gradient_accumulation_steps=3
    )
    samples = group_samples()
    results = []
    for share in (False, True):
        forward = PrefixTreeForward() if share else RowForward()
        model = tiny_model(seed=3).train()
        trainer = GRPOTrainer(model, config, pad_token_id=PAD, forward=forward)
        episodes, advantages = sample_episodes(samples)
        metrics = trainer.train_step(episodes, advantages)
        results.append((metrics, dict(trainer.unwrapped_model.named_parameters())))
    (plain, plain_weights), (shared, shared_weights) = results
    assert shared.total_tokens == plain.total_tokens == sum(s.num_tokens for s in samples)
    # The trees forward each shared prefix once; plain rows forward their padding too.
    assert 0 < shared.forwarded_positions < shared.total_tokens <= plain.forwarded_positions
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


def test_micro_batches_share_a_tree_only_within_the_budget():
    g = torch.Generator().manual_seed(1)
    batches = [[TurnSample(SYSTEM + ids(g, 20), [1, 2], None, 1.0)] for _ in range(5)]
    one = forwarded_positions(batches[0], share_prefix=True)  # 12 + 20 + 1
    runs = tree_runs(batches, budget=2 * one)
    assert [i for run in runs for i in run] == list(range(5))
    for run in runs:
        merged = [s for i in run for s in batches[i]]
        assert forwarded_positions(merged, share_prefix=True) <= 2 * one
    assert [len(run) for run in runs] == [2, 2, 1]  # two rows share SYSTEM: 12 + 2 x 21
    assert [len(run) for run in tree_runs(batches, budget=1)] == [1] * 5  # never empty


def test_trees_are_on_by_default_and_off_when_asked_or_compiled():
    def forward(config):
        return GRPOTrainer(tiny_model(), config, pad_token_id=PAD).forward

    assert isinstance(forward(GRPOConfig()), PrefixTreeForward)
    assert isinstance(forward(GRPOConfig(share_prompt_prefix=False)), RowForward)
    # Compiled, the update runs plain rows (tests/trainers/test_grpo_compile.py covers them).
    assert isinstance(forward(GRPOConfig(torch_compile=True)), RowForward)
