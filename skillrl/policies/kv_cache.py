"""The transformers KV cache across versions: where it is, its layers, the keyword taking it.

transformers renamed ``past_key_values`` to ``cache`` (5.2x) and moved a cache's tensors into
``cache.layers``; the fast play path (:mod:`skillrl.policies.forward_pass`, the scorer) and the
trainer's prefix-tree forward (``trainers.common.tree_forward``) both read caches, through these
three functions only.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch


def cache_of(output: Any) -> Any:
    """Return the KV cache a forward pass returned (transformers 5.2x calls it ``cache``)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def cache_layers(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Return (keys, values) of every layer of a transformers cache, shape [B, heads, T, dim]."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return [(item[0], item[1]) for item in cache]


def cache_keyword(model: Any) -> str:
    """Return the forward keyword of ``model``'s KV cache.

    transformers 5.2x renamed ``past_key_values`` to ``cache``; this sees through torch.compile,
    DDP and peft wrappers to the model that takes it.
    """
    inner = getattr(model, "_orig_mod", model)  # torch.compile
    inner = getattr(inner, "module", inner)  # DDP
    if hasattr(inner, "get_base_model"):  # peft passes keywords through to the base model
        inner = inner.get_base_model()
    parameters = inspect.signature(inner.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"
