"""Rollouts from a copy of the trained model: its weights refreshed from the trainer after updates.

A training run updates fp32 weights, but sampling does not need them: on a CPU with native bf16
(AVX512-BF16, AMX) or on a GPU, a bf16 copy plays a turn faster. :class:`SyncedCopyPolicy` is a
transformers policy over such a copy, made before the trainer wraps the model in LoRA; the cycle
pushes the trained weights into it after every update (``sync_weights``, the hook the vLLM
server policy has too), so every rollout plays the weights of the latest update, rounded to the
copy's dtype.

The turns it plays carry the copy's own log-probs, so the update's ratio is taken against the
policy that sampled them: the clipped ratio is then also the importance weight that corrects the
rounding difference between the copy and the fp32 weights (as PPO's ratio corrects any gap
between the behaviour policy and the one being trained; TRL corrects vLLM's in the same spirit).
The mean gap is the update's ``logprob_gap_mean``.

LoRA weights are folded in the way TRL folds them before it pushes them to vLLM:
``merge_adapter()`` in place, copy the merged base weights under the plain model's names,
``unmerge_adapter()``. The unmerge round trip is exact up to fp32 rounding.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Iterator
from typing import Any

import torch

from skillrl.policies.transformers_backend import TransformersPolicy
from skillrl_core.errors import ConfigError


def is_peft(model: Any) -> bool:
    """Whether ``model`` is a peft model (adapters to merge before its weights are read)."""
    return hasattr(model, "merge_adapter") and hasattr(model, "peft_config")


def merged_named_params(model: Any) -> Iterator[tuple[str, Any]]:
    """Base-model parameters of a peft model with merged adapters, under the plain model's names.

    Same mapping as TRL's ``VLLMGeneration._iter_named_params``: drop the ``base_model.model.``
    prefix and ``.base_layer``, skip the adapters' own tensors and ``modules_to_save`` originals.
    """
    adapter_prefix = getattr(model, "prefix", "lora_")
    for name, param in model.named_parameters():
        name = name.removeprefix("base_model.model.").replace(".base_layer", "")
        if adapter_prefix in name or "original_module" in name:
            continue
        yield name.replace("modules_to_save.default.", ""), param.data


@contextlib.contextmanager
def merged_weights(model: Any) -> Iterator[list[tuple[str, Any]]]:
    """Yield the weights a plain model of ``model``'s architecture would hold, under its names.

    A peft model's adapters are merged in place while the block runs and unmerged after it (the
    tensors are the model's own: read them inside the block); a plain model's are its own.
    """
    if not is_peft(model):
        yield [(name, p.data) for name, p in model.named_parameters()]
        return
    model.merge_adapter()
    try:
        yield list(merged_named_params(model))
    finally:
        model.unmerge_adapter()


def copy_weights(source: Any, target: Any) -> None:
    """Copy ``source``'s weights (LoRA merged) into ``target``, cast to its dtype.

    ``target`` is a plain model of the same architecture. A name of ``source`` that ``target``
    lacks (or the other way round) is an error: the copy would silently play other weights.
    """
    wanted = dict(target.named_parameters())
    with torch.no_grad(), merged_weights(source) as params:
        for name, value in params:
            if name not in wanted:
                raise ConfigError(f"the rollout copy has no parameter {name!r} to refresh")
            wanted[name].data.copy_(value)
        missing = sorted(set(wanted) - {name for name, _ in params})
    if missing:
        raise ConfigError(f"the trained model has no weights for the rollout copy's {missing[:3]}")


class SyncedCopyPolicy(TransformersPolicy):
    """A transformers policy over its own copy of a trained model, in its own dtype."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.syncs = 0
        """Weight refreshes so far."""

    @classmethod
    def copy_of(cls, policy: TransformersPolicy, dtype: torch.dtype) -> SyncedCopyPolicy:
        """Copy ``policy``'s model into ``dtype`` (before a trainer wraps it in LoRA).

        The copy has its own prompt-prefix cache of the same budget.
        """
        if is_peft(policy.model):
            raise ConfigError("copy the policy before the trainer wraps its model in LoRA")
        model = copy.deepcopy(policy.model).to(dtype).eval()
        cache = policy.prefix_cache
        budget = cache.budget_bytes if cache is not None else 0
        return cls(
            model,
            policy.tokenizer,
            name=f"{policy.name} ({str(dtype).removeprefix('torch.')} copy)",
            fast=policy.fast,
            prefix_cache_bytes=budget,
        )

    def sync_weights(self, model: Any) -> float:
        """Refresh the copy from ``model`` (the trainer's); returns the seconds it took.

        The prefix cache is emptied: KV computed with the old weights is not reused.
        """
        started = time.perf_counter()
        copy_weights(model, self.model)
        if self.prefix_cache is not None:
            self.prefix_cache.clear()
        self.syncs += 1
        return time.perf_counter() - started
