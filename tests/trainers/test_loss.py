from __future__ import annotations

import math

import pytest
import torch

from trainers.update.loss import aggregate, clipped_token_loss, k3_kl, policy_loss


def test_clip_higher_bounds_each_side_separately():
    logp = torch.tensor([[0.5, 0.5, -0.5, -0.5]])
    old = torch.zeros(1, 4)
    adv = torch.tensor([[1.0, -1.0, -1.0, 1.0]])
    loss, ratio = clipped_token_loss(logp, old, adv, epsilon_low=0.2, epsilon_high=0.28)
    e = math.exp(0.5)
    assert ratio[0, 0].item() == pytest.approx(e)
    # rho = e^0.5 > 1.28 with A > 0 -> capped at 1.28; with A < 0 the unclipped term is the min.
    # rho = e^-0.5 < 0.8 with A < 0 -> capped at 0.8; with A > 0 the unclipped term is the min.
    assert loss[0].tolist() == pytest.approx([-1.28, e, 0.8, -1 / e])


def test_clipped_tokens_get_no_gradient():
    logp = torch.tensor([[0.5, 0.1]], requires_grad=True)
    loss, _ = clipped_token_loss(logp, torch.zeros(1, 2), torch.tensor([1.0]), 0.2, 0.28)
    loss.sum().backward()
    assert logp.grad[0, 0].item() == 0.0
    assert logp.grad[0, 1].item() == pytest.approx(-math.exp(0.1))


def test_k3_kl_is_zero_at_the_reference_and_positive_elsewhere():
    logp = torch.tensor([-1.0, -2.0])
    assert k3_kl(logp, logp).tolist() == [0.0, 0.0]
    assert (k3_kl(logp, torch.tensor([-1.5, -1.0])) > 0).all()


def test_aggregations_by_hand():
    per_token = torch.tensor([[1.0, 2.0, 9.0], [3.0, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert aggregate(per_token, mask, "grpo").item() == pytest.approx((1.5 + 3.0) / 2)
    assert aggregate(per_token, mask, "bnpo").item() == pytest.approx(6.0 / 3)
    assert aggregate(per_token, mask, "dapo", num_tokens=12).item() == pytest.approx(0.5)
    assert aggregate(per_token, mask, "dr_grpo", max_completion_length=4).item() == pytest.approx(
        6.0 / 8
    )


def test_masked_positions_never_move_the_loss():
    torch.manual_seed(0)
    logp = torch.randn(2, 5)
    old = torch.randn(2, 5)
    ref = torch.randn(2, 5)
    adv = torch.tensor([0.7, -1.2])
    mask = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]])
    kwargs = dict(epsilon_low=0.2, epsilon_high=0.28, beta=0.05, ref_logprobs=ref)
    base = policy_loss(logp, old, adv, mask, **kwargs).loss
    changed = logp.clone()
    changed[mask == 0] += 100.0
    assert policy_loss(changed, old, adv, mask, **kwargs).loss.item() == pytest.approx(base.item())


def test_policy_loss_reports_kl_and_needs_ref_when_beta_positive():
    logp = torch.zeros(1, 3)
    out = policy_loss(
        logp, logp, torch.tensor([1.0]), torch.ones(1, 3), epsilon_low=0.2, epsilon_high=0.2
    )
    assert out.loss.item() == pytest.approx(-1.0)
    assert out.ratio_mean == pytest.approx(1.0)
    with pytest.raises(ValueError, match="ref_logprobs"):
        policy_loss(
            logp,
            logp,
            torch.tensor([1.0]),
            torch.ones(1, 3),
            epsilon_low=0.2,
            epsilon_high=0.2,
            beta=0.1,
        )
