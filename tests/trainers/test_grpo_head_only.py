"""The GRPO loss with the LM head on generated positions only equals the full computation.

Reference: logits for every position, a full log-softmax, the generated tokens gathered. Loss
and the gradient of every trainable parameter must agree, with and without LoRA, at a sampling
temperature other than 1, with the k3 KL to a reference, and on transformers without mask
support for ``logits_to_keep`` (the fallback slices the last C + 1 positions).
"""

from __future__ import annotations

import copy

import pytest
import torch
from test_grpo_update import PAD, tiny_model

from trainers.update import grpo, microbatch_loss
from trainers.update.batching import TurnSample, collate
from trainers.update.config import GRPOConfig
from trainers.update.loss import policy_loss
from trainers.update.microbatch_loss import compute_logprobs, compute_loss

TOLERANCE = {"atol": 1e-6, "rtol": 1e-5}


def samples() -> list[TurnSample]:
    g = torch.Generator().manual_seed(4)

    def ids(n: int) -> list[int]:
        return torch.randint(1, 64, (n,), generator=g).tolist()

    return [
        TurnSample(ids(9), ids(2), [-3.0, -2.5], 1.0),
        TurnSample(ids(3), ids(7), None, -0.5),
        TurnSample(ids(14), ids(1), [-1.0], 2.0),
        TurnSample(ids(5), ids(5), [-2.0] * 5, -1.0),
    ]


def full_logprobs(model, batch, temperature: float) -> torch.Tensor:
    """Every position's logits, full log-softmax, gathered at the completion block."""
    logits = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        use_cache=False,
    ).logits
    width = batch.completion_ids.shape[1]
    scores = (logits[:, -width - 1 : -1] / temperature).log_softmax(-1)
    picked = scores.gather(-1, batch.completion_ids.unsqueeze(-1)).squeeze(-1)
    return picked * batch.completion_mask


def full_loss(model, ref_model, batch, config: GRPOConfig, num_tokens: float) -> torch.Tensor:
    logprobs = full_logprobs(model, batch, config.temperature)
    old = torch.where(batch.has_old_logprobs.unsqueeze(1), batch.old_logprobs, logprobs.detach())
    ref = None
    if config.beta > 0:
        with torch.no_grad():
            ref = full_logprobs(ref_model, batch, config.temperature)
    return policy_loss(
        logprobs,
        old,
        batch.advantages,
        batch.completion_mask,
        epsilon_low=config.epsilon,
        epsilon_high=config.clip_high,
        loss_type=config.loss_type,
        beta=config.beta,
        ref_logprobs=ref,
        num_tokens=num_tokens,
        max_completion_length=config.max_completion_length,
    ).loss


def lora_with_live_gradients(model, config: GRPOConfig):
    """LoRA on ``model`` with B drawn at random: B = 0 at init would zero the A gradients."""
    model = grpo.apply_lora(model, config)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.2)
    return model


def trainable_grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("masked_keep", [True, False])
@pytest.mark.parametrize("lora", [False, True])
def test_loss_and_gradients_equal_the_full_logits_computation(monkeypatch, lora, masked_keep):
    # Without mask support in transformers the last C + 1 positions are projected instead.
    monkeypatch.setattr(microbatch_loss, "_MASKED_KEEP", masked_keep)
    config = GRPOConfig(beta=0.05, temperature=0.7, use_peft=lora)
    model = tiny_model(seed=2).train()
    ref_model = tiny_model(seed=5)  # any other policy: the KL term must be non-zero
    if lora:
        model = lora_with_live_gradients(model, config)
    reference = copy.deepcopy(model)
    batch = collate(samples(), PAD)
    tokens = float(batch.num_completion_tokens)

    out, fresh = compute_loss(
        model, batch, config, num_tokens=tokens, ref_model=None if lora else ref_model
    )
    baseline, _ = compute_loss(
        copy.deepcopy(model),
        batch,
        config,
        num_tokens=tokens,
        ref_model=None if lora else ref_model,
        head_only=False,
    )
    out.loss.backward()
    expected = full_loss(reference, _base_view(reference, ref_model, lora), batch, config, tokens)
    expected.backward()

    assert out.kl > 0
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert baseline.loss.item() == pytest.approx(expected.item(), rel=1e-5)
    torch.testing.assert_close(fresh, full_logprobs(reference, batch, 0.7).detach(), **TOLERANCE)
    mine, theirs = trainable_grads(model), trainable_grads(reference)
    assert mine.keys() == theirs.keys() and mine
    for name, grad in theirs.items():
        assert grad.abs().sum() > 0, name
        torch.testing.assert_close(mine[name], grad, **TOLERANCE, msg=name)


class _AdapterOff(torch.nn.Module):
    """The reference of a LoRA run: the same peft model with its adapter disabled."""

    def __init__(self, peft_model) -> None:
        super().__init__()
        self.peft_model = peft_model

    def forward(self, **kwargs):
        with self.peft_model.disable_adapter():
            return self.peft_model(**kwargs)


def _base_view(reference, ref_model, lora: bool):
    return _AdapterOff(reference) if lora else ref_model


def test_rows_without_a_generated_token_at_a_column_are_zero():
    model = tiny_model()
    batch = collate(samples(), PAD)
    with torch.no_grad():
        logprobs = compute_logprobs(model, batch)
    assert (logprobs[batch.completion_mask == 0] == 0).all()
    assert (logprobs[batch.completion_mask == 1] < 0).all()
