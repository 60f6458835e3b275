"""Run a micro-batch's shared prompt prefix once in a GRPO update, gradients included.

A GRPO group's G episodes see the same first page, and every turn of every episode starts with
the same system message; a plain batch runs each row's whole prompt, so that shared prefix goes
through the model (forward and backward) once per row. Here it runs once, as a batch of one
with ``use_cache``; its keys and values, still attached to the autograd graph, are expanded to
the B rows (a view, no copy) and the rows run on top of them. Backward through the expansion
sums the rows' gradients into the one prefix pass, so loss and gradients are those of the
plain batch (to float rounding; tests/trainers/test_grpo_shared_prefix.py).

Why not transformers' own prefix caching: its caches are for generation under ``no_grad``;
training through a cache needs the rows' view of it built by hand, as here.
"""

from __future__ import annotations

from typing import Any

import torch

from skillrl.policies.prefix_cache import cache_keyword, cache_layers
from skillrl.policies.transformers_scoring import cache_of
from trainers.batching import TurnBatch


def forward_rows(model: Any, batch: TurnBatch, logits_to_keep: Any) -> Any:
    """Run ``batch``'s rows, on top of its shared prefix (run once) if it has one."""
    if batch.prefix_ids is None:
        return model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
            logits_to_keep=logits_to_keep,
            use_cache=False,
        )
    from transformers import DynamicCache

    keyword = cache_keyword(model)
    rows, shared = batch.input_ids.shape[0], batch.prefix_ids.shape[1]
    prefix = model(input_ids=batch.prefix_ids, logits_to_keep=1, use_cache=True)
    cache = cache_of(prefix)
    expanded = DynamicCache(
        ddp_cache_data=[
            (keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1))
            for keys, values in cache_layers(cache)
        ]
    )
    prefix_mask = batch.attention_mask.new_ones((rows, shared))
    return model(
        input_ids=batch.input_ids,
        attention_mask=torch.cat([prefix_mask, batch.attention_mask], dim=1),
        position_ids=batch.position_ids,
        logits_to_keep=logits_to_keep,
        use_cache=True,
        **{keyword: expanded},
    )
