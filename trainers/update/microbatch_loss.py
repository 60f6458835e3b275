"""One micro-batch of the GRPO update: the generated tokens' log-probs and the clipped loss.

:func:`compute_logprobs` runs the batch as plain rows with the LM head only where a generated
token is predicted; :func:`microbatch_loss` applies ``trainers.update.loss.policy_loss`` to a
batch's log-probs, with the k3 KL to the reference policy (:func:`reference_policy`) when ``beta`` >
0, and :func:`compute_loss` is the two together. :class:`StepForward` is how the trainer gets a
step's log-probs: :class:`RowForward` (each micro-batch as plain rows, here) or
:class:`trainers.update.tree_logprobs.PrefixTreeForward` (micro-batches as prefix trees).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
from transformers import modeling_utils
from trl.trainer.utils import selective_log_softmax

from trainers.update.batching import TurnBatch, TurnSample
from trainers.update.config import GRPOConfig
from trainers.update.loss import LossOutput, policy_loss

_MASKED_KEEP = hasattr(modeling_utils, "slice_logits_to_keep")
"""Whether ``logits_to_keep`` takes a [B, L] boolean mask (logits of the True positions only)."""


def completion_positions(batch: TurnBatch) -> torch.Tensor:
    """[B, L] bool: the positions whose next token is a generated token (they need logits).

    Completions are right-aligned: column c of the [B, C] block is position L - C + c, predicted
    by the hidden state at position L - C - 1 + c.
    """
    length, width = batch.input_ids.shape[1], batch.completion_ids.shape[1]
    keep = torch.zeros(batch.input_ids.shape, dtype=torch.bool, device=batch.input_ids.device)
    keep[:, length - width - 1 : length - 1] = batch.completion_mask.bool()
    return keep


def compute_logprobs(
    model: Any, batch: TurnBatch, temperature: float = 1.0, *, head_only: bool = True
) -> torch.Tensor:
    """Per-token log pi(o_t | prompt, o_<t) of the right-aligned completions, shape [B, C].

    The LM head (49,152 x 576 for SmolLM2) runs only on the positions that predict a generated
    token (``logits_to_keep`` as a boolean mask): not on the prompt, and not on the padding of
    the completion block of a row shorter than the batch's longest completion. Entries where
    ``completion_mask`` is 0 are 0. With ``head_only`` False (the benchmarks' baseline), and on
    transformers without mask support (before ``slice_logits_to_keep``), the head runs on the
    last C + 1 positions of every row and the same rows are picked after.
    """
    mask = batch.completion_mask.bool()
    masked = head_only and _MASKED_KEEP
    keep = completion_positions(batch) if masked else batch.completion_ids.shape[1] + 1
    output = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        logits_to_keep=keep,
        use_cache=False,
    )
    logits = output.logits if masked else output.logits[:, :-1][mask]
    # One [1, n, V] row: selective_log_softmax loops over the leading dimension on CPU.
    picked = selective_log_softmax(
        logits.float().unsqueeze(0), batch.completion_ids[mask].unsqueeze(0), temperature
    )[0]
    return picked.new_zeros(mask.shape).masked_scatter(mask, picked)


def compute_loss(
    model: Any,
    batch: TurnBatch,
    config: GRPOConfig,
    *,
    num_tokens: float | None = None,
    ref_model: Any | None = None,
    head_only: bool = True,
) -> tuple[LossOutput, torch.Tensor]:
    """Compute the GRPO loss of one micro-batch as plain rows; also return its fresh log-probs.

    :func:`compute_logprobs` then :func:`microbatch_loss`, with the reference policy's
    log-probs when ``beta`` > 0 (``ref_model``, or ``model`` without its LoRA adapter).
    """

    def logprobs_of(m: Any) -> torch.Tensor:
        return compute_logprobs(m, batch, config.temperature, head_only=head_only)

    logprobs = logprobs_of(model)
    ref = None
    if config.beta > 0:
        with torch.no_grad():
            ref = reference_policy(model, ref_model, logprobs_of)
    return microbatch_loss(batch, config, logprobs, ref_logprobs=ref, num_tokens=num_tokens)


def microbatch_loss(
    batch: TurnBatch,
    config: GRPOConfig,
    logprobs: torch.Tensor,
    *,
    ref_logprobs: torch.Tensor | None = None,
    num_tokens: float | None = None,
) -> tuple[LossOutput, torch.Tensor]:
    """Apply the clipped objective to a micro-batch's log-probs; also return them detached.

    Samples without rollout log-probs start on-policy: pi_old is the current policy.
    """
    fresh = logprobs.detach()
    old = torch.where(batch.has_old_logprobs.unsqueeze(1), batch.old_logprobs, fresh)
    out = policy_loss(
        logprobs,
        old,
        batch.advantages,
        batch.completion_mask,
        epsilon_low=config.epsilon,
        epsilon_high=config.clip_high,
        loss_type=config.loss_type,
        beta=config.beta,
        ref_logprobs=ref_logprobs,
        num_tokens=num_tokens,
        max_completion_length=config.max_completion_length,
    )
    return out, fresh


class StepForward(Protocol):
    """How an optimizer step's micro-batches go through the model: a ``GRPOTrainer`` strategy.

    Every strategy gives the same log-probs (to float rounding); they differ in what they
    forward (``tests/trainers/test_grpo_prefix_tree.py`` holds the trees to the rows).
    """

    share_prefix: bool
    """Cut micro-batches so that turns sharing a prompt sit together when that forwards less
    (``trainers.update.batching.step_batches``)."""

    def runs(self, shares: Sequence[Sequence[TurnSample]], budget: int) -> list[range]:
        """Return which micro-batches go through one forward.

        ``budget``: the positions a run may hold, what one plain micro-batch of the step's
        longest turns forwards.
        """
        ...

    def logprobs(
        self,
        model: Any,
        batches: Sequence[TurnBatch],
        shares: Sequence[Sequence[TurnSample]],
        temperature: float,
    ) -> list[torch.Tensor]:
        """Return the per-token log-probs [B, C] of each batch (collated from ``shares``)."""
        ...


class RowForward:
    """Each micro-batch through the model alone, as padded rows, a ``StepForward``.

    The LM head runs only where a generated token is predicted. What DDP and ``torch.compile``
    run.
    """

    share_prefix = False

    def runs(self, shares: Sequence[Sequence[TurnSample]], budget: int) -> list[range]:
        """Return one run per micro-batch."""
        return [range(i, i + 1) for i in range(len(shares))]

    def logprobs(
        self,
        model: Any,
        batches: Sequence[TurnBatch],
        shares: Sequence[Sequence[TurnSample]],
        temperature: float,
    ) -> list[torch.Tensor]:
        """Return :func:`compute_logprobs` of each batch."""
        return [compute_logprobs(model, batch, temperature) for batch in batches]


def reference_policy(model: Any, ref_model: Any | None, compute: Callable[[Any], Any]) -> Any:
    """Run ``compute`` on the reference policy: ``ref_model``, or ``model`` without its adapter."""
    if ref_model is not None:
        return compute(ref_model)
    # LoRA: the reference is the base model, i.e. the same model with its adapter switched off.
    # Under DDP the adapter lives on the wrapped module (no gradient flows here, so no sync).
    model = getattr(model, "module", model)
    with model.disable_adapter():
        return compute(model)
