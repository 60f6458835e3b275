"""Length-sorted micro-batches: less padding, the same samples per optimizer step, the same step
gradient (``dapo``) as shuffled micro-batches."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_grpo_update import PAD, tiny_model

from trainers.update.batching import TurnSample, collate, micro_batches, padding_fraction
from trainers.update.config import GRPOConfig
from trainers.update.microbatch_loss import compute_loss


def sample(prompt: int, completion: int, advantage: float = 1.0, seed: int = 0) -> TurnSample:
    g = torch.Generator().manual_seed(seed)
    return TurnSample(
        prompt_ids=torch.randint(1, 64, (prompt,), generator=g).tolist(),
        completion_ids=torch.randint(1, 64, (completion,), generator=g).tolist(),
        old_logprobs=None,
        advantage=advantage,
    )


def steps(batches, window):
    return [
        sorted(id(s) for b in batches[i : i + window] for s in b)
        for i in range(0, len(batches), window)
    ]


@settings(max_examples=30, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=30),
    size=st.integers(1, 5),
    window=st.integers(1, 4),
)
def test_sorting_keeps_each_steps_samples_and_never_adds_padding(lengths, size, window):
    samples = [sample(n, 2, seed=i) for i, n in enumerate(lengths)]
    plain = micro_batches(samples, size, torch.Generator().manual_seed(3))
    ordered = micro_batches(samples, size, torch.Generator().manual_seed(3), sort_window=window)
    assert steps(plain, window) == steps(ordered, window)
    assert sorted(len(b) for b in plain) == sorted(len(b) for b in ordered)
    assert all(0 < len(b) <= size for b in ordered)
    # Sorting a step's rows by length minimises that step's padded area (exchange argument).
    for i in range(0, len(plain), window):
        assert (
            padding_fraction(ordered[i : i + window])
            <= padding_fraction(plain[i : i + window]) + 1e-12
        )


def test_sort_window_below_one_is_refused():
    with pytest.raises(ValueError, match="sort_window"):
        micro_batches([sample(3, 2)], 1, sort_window=0)


def step_gradient(model, batches, config):
    model.zero_grad(set_to_none=True)
    tokens = float(sum(collate(b, PAD).num_completion_tokens for b in batches))
    loss_sum = 0.0
    for b in batches:
        out, _ = compute_loss(model, collate(b, PAD), config, num_tokens=tokens)
        out.loss.backward()
        loss_sum += float(out.loss.detach())
    return loss_sum, {n: p.grad.clone() for n, p in model.named_parameters()}


def test_a_sorted_step_has_the_loss_and_gradient_of_the_shuffled_step():
    model = tiny_model().train()
    lengths = [3, 30, 5, 28, 4, 31, 6, 29]
    samples = [
        sample(n, 1 + i % 4, advantage=(-1.0) ** i * (1 + i / 10), seed=i)
        for i, n in enumerate(lengths)
    ]
    config = GRPOConfig(per_device_train_batch_size=2, gradient_accumulation_steps=4)
    plain = micro_batches(samples, 2, torch.Generator().manual_seed(0))
    ordered = micro_batches(samples, 2, torch.Generator().manual_seed(0), sort_window=4)
    assert padding_fraction(ordered) < padding_fraction(plain)
    loss_plain, grad_plain = step_gradient(model, plain, config)
    loss_sorted, grad_sorted = step_gradient(model, ordered, config)
    assert loss_sorted == pytest.approx(loss_plain, abs=1e-6)
    for name, grad in grad_plain.items():
        torch.testing.assert_close(grad_sorted[name], grad, atol=1e-6, rtol=1e-5, msg=name)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 30), min_size=1, max_size=25),
    size=st.integers(1, 4),
    window=st.integers(1, 3),
    sort=st.booleans(),
)
def test_one_process_steps_are_todays_micro_batches(lengths, size, window, sort):
    from trainers.update.batching import step_batches

    samples = [sample(n, 1 + n % 4, seed=i) for i, n in enumerate(lengths)]
    today = micro_batches(
        samples, size, torch.Generator().manual_seed(7), sort_window=window if sort else 1
    )
    cut = step_batches(samples, size, window, torch.Generator().manual_seed(7), sort=sort)
    assert [b for _, batches in cut for b in batches] == today
    assert [len(batches) for _, batches in cut] == [
        len(today[i : i + window]) for i in range(0, len(today), window)
    ]


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 30), min_size=1, max_size=25),
    size=st.integers(1, 4),
    window=st.integers(1, 3),
    count=st.integers(2, 4),
)
def test_processes_cut_the_same_steps_and_their_shares_partition_each(lengths, size, window, count):
    from trainers.update.batching import step_batches

    samples = [sample(n, 1 + n % 4, seed=i) for i, n in enumerate(lengths)]
    cuts = [
        step_batches(samples, size, window, torch.Generator().manual_seed(7), index=i, count=count)
        for i in range(count)
    ]
    assert len({len(cut) for cut in cuts}) == 1  # every process takes as many optimizer steps
    for number, (step, _) in enumerate(cuts[0]):
        assert len(step) <= size * window * count
        assert all(cut[number][0] == step for cut in cuts)
        shares = [s for cut in cuts for batch in cut[number][1] for s in batch]
        assert sorted(map(id, shares)) == sorted(map(id, step))
        assert all(len(b) <= size for cut in cuts for b in cut[number][1])
    every = [s for step, _ in cuts[0] for s in step]
    assert sorted(map(id, every)) == sorted(map(id, samples))
