"""The clipped policy-gradient loss over generated tokens, as pure tensor functions.

Per token (PPO's clipped surrogate with DAPO's decoupled clip, DAPO Eq. 10):
  rho_t = exp(log pi_theta(o_t) - log pi_old(o_t))
  l_t = -min(rho_t * A, clip(rho_t, 1 - epsilon, 1 + epsilon_high) * A) + beta * KL_t
with the k3 estimator of KL to the reference model (Schulman, "Approximating KL divergence";
the same estimator TRL's GRPOTrainer uses):
  KL_t = exp(log pi_ref - log pi_theta) - (log pi_ref - log pi_theta) - 1.

Aggregation (``loss_type``, TRL's names): ``dapo`` sums over the tokens and divides by the number
of generated tokens in the whole accumulated batch (passed in as ``num_tokens``); ``bnpo`` divides
by the tokens of this micro-batch; ``grpo`` averages per sequence, then over sequences;
``dr_grpo`` divides by sequences x ``max_completion_length``. Only positions where ``mask`` is 1
(generated tokens) ever contribute: prompt, observation and skill tokens have mask 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LossOutput:
    """The loss of one micro-batch and what it is made of (floats are detached means)."""

    loss: torch.Tensor
    policy_loss: float
    kl: float
    clip_low_fraction: float
    """Share of generated tokens whose ratio hit the lower clip with negative advantage."""
    clip_high_fraction: float
    """Share of generated tokens whose ratio hit the upper clip with positive advantage."""
    ratio_mean: float


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token KL(pi_theta || pi_ref) by the k3 estimator: exp(d) - d - 1, d = ref - theta."""
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1


def clipped_token_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    epsilon_low: float,
    epsilon_high: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token -min(rho A, clip(rho, 1-eps_low, 1+eps_high) A) (DAPO Eq. 10); returns (loss, rho).

    ``advantages`` is per sequence (shape [B]) or per token (shape [B, T]).
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    ratio = torch.exp(logprobs - old_logprobs)
    clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
    return -torch.min(ratio * advantages, clipped * advantages), ratio


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    loss_type: str,
    *,
    num_tokens: float | None = None,
    max_completion_length: int | None = None,
) -> torch.Tensor:
    """Reduce per-token losses over generated tokens only, by ``loss_type`` (see module doc)."""
    masked = torch.where(mask.bool(), per_token, torch.zeros_like(per_token))
    mask = mask.to(per_token.dtype)
    if loss_type == "grpo":
        lengths = mask.sum(dim=1).clamp(min=1.0)
        return (masked.sum(dim=1) / lengths).mean()
    if loss_type == "bnpo":
        return masked.sum() / mask.sum().clamp(min=1.0)
    if loss_type == "dapo":
        denominator = float(num_tokens) if num_tokens else float(mask.sum().clamp(min=1.0))
        return masked.sum() / denominator
    if loss_type == "dr_grpo":
        if not max_completion_length:
            raise ValueError("dr_grpo needs max_completion_length")
        return masked.sum() / (per_token.shape[0] * max_completion_length)
    raise ValueError(f"unknown loss_type {loss_type!r}")


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    epsilon_low: float,
    epsilon_high: float,
    loss_type: str = "dapo",
    beta: float = 0.0,
    ref_logprobs: torch.Tensor | None = None,
    num_tokens: float | None = None,
    max_completion_length: int | None = None,
) -> LossOutput:
    """Compute the full GRPO objective of one micro-batch (clipped surrogate + beta * k3 KL)."""
    # Neutralise positions outside the mask before any exp(): padding logits can be extreme, and
    # 0 * inf in the forward or backward pass would poison the whole batch with NaN.
    keep = mask.bool()
    logprobs = torch.where(keep, logprobs, old_logprobs.detach())
    if ref_logprobs is not None:
        ref_logprobs = torch.where(keep, ref_logprobs, logprobs.detach())
    per_token, ratio = clipped_token_loss(
        logprobs, old_logprobs, advantages, epsilon_low, epsilon_high
    )
    kl_value = 0.0
    total = per_token
    if beta > 0:
        if ref_logprobs is None:
            raise ValueError("beta > 0 needs ref_logprobs")
        kl = k3_kl(logprobs, ref_logprobs)
        total = per_token + beta * kl
        kl_value = _masked_mean(kl, mask)
    loss = aggregate(
        total,
        mask,
        loss_type,
        num_tokens=num_tokens,
        max_completion_length=max_completion_length,
    )
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    adv = adv.expand_as(ratio)
    low = (ratio < 1 - epsilon_low) & (adv < 0)
    high = (ratio > 1 + epsilon_high) & (adv > 0)
    return LossOutput(
        loss=loss,
        policy_loss=_masked_mean(per_token, mask),
        kl=kl_value,
        clip_low_fraction=_masked_mean(low.to(per_token.dtype), mask),
        clip_high_fraction=_masked_mean(high.to(per_token.dtype), mask),
        ratio_mean=_masked_mean(ratio, mask),
    )


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    kept = torch.where(mask.bool(), values.detach(), torch.zeros_like(values))
    return float(kept.sum() / mask.to(values.dtype).sum().clamp(min=1.0))
