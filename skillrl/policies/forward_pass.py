"""One forward pass over a causal LM, shared by generation and candidate scoring.

:class:`ForwardPass` owns what both use: the model and tokenizer, the prompt-prefix KV cache
(:mod:`skillrl.policies.kv_reuse`), the counters (:class:`PolicyStats`), encoding a batch of
conversations and prefilling prompts on their cached prefixes. The policy
(:class:`~skillrl.policies.transformers_backend.TransformersPolicy`) generates with it and the
scorer (:mod:`skillrl.policies.transformers_scoring`) scores with it; neither reaches into the
other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch

from skillrl.policies.base import Conversation, render_chat
from skillrl.policies.kv_cache import cache_keyword, cache_layers, cache_of
from skillrl.policies.kv_reuse import (
    DEFAULT_BUDGET_BYTES,
    Hit,
    PrefixKVCache,
    assemble,
    row_layers,
    weights_version,
)
from skillrl.policies.policy_stats import PolicyStats


@dataclass
class EncodedBatch:
    """Prompts as one left-padded batch."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    prompt_ids: list[list[int]]

    def rows(self, index: list[int]) -> EncodedBatch:
        """Return the sub-batch of ``index`` (same width: the widest rows stay the widest)."""
        return EncodedBatch(
            self.input_ids[index],
            self.attention_mask[index],
            [self.prompt_ids[i] for i in index],
        )


class ForwardPass:
    """A model, its tokenizer and prefix cache, and the passes generation and scoring share."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        fast: bool = True,
        prefix_cache_bytes: int = DEFAULT_BUDGET_BYTES,
    ) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.fast = fast
        """Share work between rows and calls (identical prompts encoded once, candidates packed
        into one row per prompt, cached prompt prefixes reused); False runs the plain batched
        path (the benchmarks' baseline)."""
        self.prefix_cache: PrefixKVCache | None = (
            PrefixKVCache(prefix_cache_bytes) if prefix_cache_bytes else None
        )
        """KV of recently encoded prompts, reused by later prompts that start the same way
        (fast path only; None turns reuse off)."""
        self.stats = PolicyStats()
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token

    @property
    def model(self) -> Any:
        """The causal LM (the trainer updates it in place, or sets a new one)."""
        return self._model

    @model.setter
    def model(self, model: Any) -> None:
        self._model = model
        self.cache_kwarg = cache_keyword(model)
        """The keyword this model's forward takes its KV cache by."""

    @property
    def device(self) -> torch.device:
        """Device the model's weights are on."""
        return next(self.model.parameters()).device

    def count_tokens(self, text: str) -> int:
        """Count the tokens of ``text`` (no special tokens added)."""
        return len(self.token_ids(text))

    def token_ids(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def render(self, conversation: Conversation) -> str:
        """Render a conversation as prompt text (an assistant last message is continued)."""
        return render_chat(self.tokenizer, conversation)

    def encode(self, conversations: list[Conversation]) -> EncodedBatch:
        """Render and tokenize ``conversations`` as one left-padded batch on the model's device."""
        ids = [self.token_ids(self.render(c)) for c in conversations]
        width = max(len(row) for row in ids)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in ids], dtype=torch.long)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in ids], dtype=torch.long)
        return EncodedBatch(input_ids.to(self.device), mask.to(self.device), ids)

    def count_encoded(self, prompts: list[list[int]], reused: int = 0, rows: bool = True) -> None:
        """Count ``prompts`` as encoded, ``reused`` of their tokens taken from the cache.

        ``rows``: False for a batch's shared prefix (tokens computed, but no prompt of its own).
        """
        self.stats.computed_rows += len(prompts) if rows else 0
        self.stats.prefill_tokens += sum(len(r) for r in prompts) - reused
        self.stats.reused_tokens += reused
        shared = len(os.path.commonprefix(prompts)) if len(prompts) > 1 else 0
        self.stats.prefix_shareable_tokens += shared * (len(prompts) - 1)

    def prefill(
        self, prompts: list[list[int]], *, shared: bool = False
    ) -> tuple[Any, torch.Tensor]:
        """Encode distinct ``prompts`` on top of their cached prefixes; keep their KV for later.

        Returns the forward output (last position's logits and the KV cache) and the attention
        mask over that cache's columns (rows are ``[pad, cached prefix, pad, new tokens]``).
        ``shared``: ``prompts`` is a batch's common prefix, encoded only to be cached.
        """
        from transformers import DynamicCache

        cache = self.prefix_cache if self.fast else None
        if cache is not None:
            cache.check_version(weights_version(self.model))
            common = os.path.commonprefix(prompts) if len(prompts) > 1 else []
            # A prefix all rows share (the system message at least) but the cache lacks is
            # encoded once here, so that every row finds it below.
            if len(common) > cache.min_reuse and cache.lookup(common).length < len(common) - 1:
                self.prefill([common], shared=True)
            hits = [cache.lookup(p) for p in prompts]
        else:
            hits = [Hit(0, None) for _ in prompts]
        layout = assemble(prompts, hits, self.tokenizer.pad_token_id)
        self.count_encoded(prompts, reused=sum(h.length for h in hits), rows=not shared)
        past = None if layout.past is None else DynamicCache(ddp_cache_data=layout.past)
        mask = layout.attention_mask.to(self.device)
        out = self.forward(
            layout.input_ids.to(self.device), mask, layout.position_ids.to(self.device), past, 1
        )
        if cache is not None:
            layers = cache_layers(cache_of(out))
            for row, prompt in enumerate(prompts):
                cache.store(prompt, row_layers(layers, row, mask[row]))
        return out, mask

    def forward(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor | None,
        cache: Any,
        keep: int = 0,
    ) -> Any:
        """One forward pass; ``keep``: logits of the last ``keep`` positions only (0: all)."""
        if positions is None:  # left padding: positions count only real tokens
            positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        kwargs: dict[str, Any] = {self.cache_kwarg: cache, "use_cache": True}
        if keep:
            kwargs["logits_to_keep"] = keep
        return self.model(input_ids=ids, attention_mask=mask, position_ids=positions, **kwargs)
