"""Next-token log-probabilities with the LM head run only on the positions that carry loss.

TRL's ``SFTTrainer`` patches the model so that ``model(..., labels=, fused_lm_head=True)``
returns per-token log-probabilities (``trl.trainer.utils.add_fused_lm_head``). On CUDA it scores
only the labelled positions; on every other device it runs the vocabulary projection
(49,152 x 576 for SmolLM2) over *every* position, in tiles, and its backward recomputes each
tile. Behaviour-cloning targets are a few dozen tokens after prompts of hundreds, so on CPU most
of that projection is thrown away. :func:`add_head_only_lm_head` installs a forward with the same
contract (same :class:`~trl.trainer.utils.FusedCausalLMOutput`, same loss reduction) that gathers
the final hidden states of the labelled positions first and projects only those.

The numbers are the same as TRL's and as plain full logits (``-log_softmax(logits)[target]``,
summed over labelled tokens, divided by ``num_items_in_batch`` or else by their count):
``tests/trainers/test_head_loss.py`` compares loss and every trainable parameter's gradient.
Models whose logits are more than the head projection (logit scaling, soft-capping) or that add
an MoE router loss keep TRL's head (:func:`supports_head_only`); SmolLM2 and the other
Llama-family models are plain. Pre-shifted ``shift_labels`` are scored without shifting, as TRL
does.
"""

from __future__ import annotations

import types
from typing import Any

import torch
from torch.nn import functional as F

from trainers.common.tree_forward import labelled_logits

_SCALING_FIELDS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)
"""Config fields with which a model transforms its logits after the head (TRL reads the same)."""


def supports_head_only(model: Any) -> bool:
    """Whether the head-only forward can stand in for TRL's here.

    It can when TRL's ``SFTTrainer`` asks for the fused head and ``model``'s logits are
    the plain head projection (no scaling, no soft-cap, no MoE router loss).
    """
    from trl.trainer import utils as trl_utils

    if not hasattr(trl_utils, "FusedCausalLMOutput"):
        return False  # a TRL whose SFTTrainer does not call the fused head: nothing to replace
    config = model.config.get_text_config()
    if getattr(config, "output_router_logits", False):
        return False
    return all(getattr(config, name, None) in (None, 1.0) for name in _SCALING_FIELDS)


def target_logprobs(
    hidden: torch.Tensor, lm_head: torch.nn.Module, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Log-probability, entropy and top-1 hit of each labelled next token.

    ``hidden`` (batch, positions, width) is aligned with ``labels`` (batch, positions): position
    t's hidden state predicts ``labels[:, t]``; ``-100`` marks positions without loss. The head
    runs on the labelled rows only; the outputs are scattered back to the labels' shape, zero
    where unlabelled (``masked_scatter`` keeps a batch without any labelled token connected to
    the graph, so its backward gives zero gradients instead of failing).
    """
    mask = labels != -100
    return _spread(mask, lm_head(hidden[mask]), labels[mask])


def _spread(
    mask: torch.Tensor, logits: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return :func:`target_logprobs`' three outputs from the labelled positions' logits.

    ``logits`` has one row per labelled position, in ``mask``'s row-major order.
    """
    logits = logits.float()  # (kept, vocab): a log-softmax needs the full row
    log_probs = -F.cross_entropy(logits, targets, reduction="none")
    with torch.no_grad():  # metrics only: TRL logs them detached
        log_softmax = logits.log_softmax(-1)
        entropy = -(log_softmax.exp() * log_softmax).sum(-1)
        # argmax returns the first maximum, as TRL's is_top1 (a tie with an earlier token misses)
        is_top1 = logits.argmax(-1) == targets

    def full(values: torch.Tensor) -> torch.Tensor:
        return values.new_zeros(mask.shape).masked_scatter(mask, values)

    return full(log_probs), full(entropy), full(is_top1)


def _tree_fits(args: tuple, kwargs: dict[str, Any], labels: torch.Tensor) -> bool:
    """Whether a batch can run as a prefix tree: plain right-padded token rows, some labelled.

    Anything else (packed rows with ``position_ids``, embeddings instead of ids, left padding, a
    single row) runs as rows. Keywords left at None (peft passes ``inputs_embeds=None`` and the
    output flags through) ask for nothing.
    """
    given = {key for key, value in kwargs.items() if value is not None}
    if args or given - {"input_ids", "attention_mask", "use_cache"}:
        return False
    ids, mask = kwargs.get("input_ids"), kwargs.get("attention_mask")
    if ids is None or mask is None or ids.shape[0] < 2 or not bool((labels != -100).any()):
        return False
    lengths = mask.sum(-1, keepdim=True)
    return bool((mask == (torch.arange(mask.shape[1], device=mask.device) < lengths)).all())


def add_head_only_lm_head(model: Any, *, tree: bool = False) -> None:
    """Make ``model(..., labels=, fused_lm_head=True)`` project only the labelled positions.

    With ``tree``, a batch's rows run as their prefix tree (:func:`trainers.common.tree_forward.
    labelled_logits`): a prefix that several rows share (the system message, an episode's
    earlier turns) goes through the model once. Same loss and gradients to float rounding.

    ``model`` is the causal LM itself (for a peft model, ``get_base_model()``), already patched
    by TRL or not; calls without ``fused_lm_head`` go to the forward it had before. Undo with
    :func:`remove_head_only_lm_head`.
    """
    from trl.trainer.utils import FusedCausalLMOutput

    previous = model.forward

    def _forward(
        self: Any,
        *args: Any,
        fused_lm_head: bool = False,
        labels: torch.Tensor | None = None,
        shift_labels: torch.Tensor | None = None,
        num_items_in_batch: Any = None,
        **kwargs: Any,
    ) -> Any:
        if not fused_lm_head:
            extra = {"labels": labels, "shift_labels": shift_labels}
            extra["num_items_in_batch"] = num_items_in_batch
            kwargs.update({k: v for k, v in extra.items() if v is not None})
            return previous(*args, **kwargs)
        kwargs["use_cache"] = False
        head = self.get_output_embeddings()
        shifted = (labels[:, 1:] if shift_labels is None else shift_labels).to(head.weight.device)
        mask = shifted != -100
        if tree and shift_labels is None and _tree_fits(args, kwargs, shifted):
            logits = labelled_logits(self, kwargs["input_ids"], shifted)
            log_probs, entropy, is_top1 = _spread(mask, logits, shifted[mask])
        else:
            # The backbone (after the final norm) is looked up per call: peft swaps its layers.
            hidden = self.base_model(*args, **kwargs).last_hidden_state
            if shift_labels is None:
                hidden = hidden[:, :-1]
            log_probs, entropy, is_top1 = target_logprobs(
                hidden.to(head.weight.device), head, shifted
            )
        # TRL's reduction: sum over labelled tokens / (num_items_in_batch or their count)
        denominator = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
        return FusedCausalLMOutput(
            loss=-log_probs.sum() / denominator,
            log_probs=log_probs,
            entropy=entropy,
            is_top1=is_top1,
            label_mask=mask,
        )

    model.forward = types.MethodType(_forward, model)


def remove_head_only_lm_head(model: Any) -> None:
    """Drop every instance-level forward patch (this module's and TRL's) from ``model``.

    Both patches live in the instance ``__dict__``; without them the class forward runs, so a
    model that goes through several fine-tuning rounds does not pile up wrappers.
    """
    model.__dict__.pop("forward", None)
