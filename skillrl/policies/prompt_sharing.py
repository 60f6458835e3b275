"""Compute each distinct prompt once: row deduplication, KV-cache row selection, packed candidates.

Pure helpers of the fast path (:mod:`skillrl.policies.forward_pass`, the policy and its scorer); the
cache that keeps prompt prefixes across calls is :mod:`skillrl.policies.kv_reuse`:

- :func:`dedupe` maps a batch of token rows to its distinct rows (the G episodes of a GRPO
  group send the identical first-turn prompt; greedy groups stay identical all episode long).
- :func:`select_rows` builds a ``DynamicCache`` whose row ``i`` is row ``index[i]`` of another
  cache (expanding a distinct prompt's KV cache back to its copies).
- :func:`pack_candidates` lays all candidates of one prompt side by side in one row, with a 4D
  mask in which each candidate token sees the prompt and the earlier tokens of its own candidate
  only (tree attention), so candidates need no copy of the prompt's KV cache at all.

A prefix common to *different* prompts (the system message every prompt of an environment
starts with, an episode's previous turn) is shared through the prompt-prefix KV cache instead:
:mod:`skillrl.policies.kv_reuse`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from skillrl.policies.kv_cache import cache_layers


@dataclass
class Dedupe:
    """Distinct rows of a batch and where each original row went."""

    unique: list[int]
    """Index (into the original batch) of the first occurrence of each distinct row."""
    index: list[int]
    """For every original row, the position of its distinct row in ``unique``."""

    @property
    def saved(self) -> int:
        """Rows that need no computation of their own."""
        return len(self.index) - len(self.unique)


def dedupe(keys: Sequence[Hashable]) -> Dedupe:
    """Group equal keys; the first occurrence of each represents it (order kept)."""
    first: dict[Hashable, int] = {}
    unique: list[int] = []
    index: list[int] = []
    for row, key in enumerate(keys):
        if key not in first:
            first[key] = len(unique)
            unique.append(row)
        index.append(first[key])
    return Dedupe(unique=unique, index=index)


def select_rows(cache: Any, index: Sequence[int] | torch.Tensor) -> Any:
    """Build a ``DynamicCache`` whose row ``i`` is a copy of ``cache``'s row ``index[i]``."""
    from transformers import DynamicCache

    layers = cache_layers(cache)
    if not isinstance(index, torch.Tensor):
        index = torch.tensor(list(index), dtype=torch.long, device=layers[0][0].device)
    return DynamicCache(ddp_cache_data=[(k[index], v[index]) for k, v in layers])


@dataclass
class PackedCandidates:
    """Candidate tokens of several prompts, one row per prompt, ready for one forward pass."""

    input_ids: torch.Tensor
    """[P, S]: each row's candidates' tokens except their last (nothing reads its logits)."""
    position_ids: torch.Tensor
    """[P, S]: prompt length + offset inside the candidate."""
    attention_mask: torch.Tensor
    """[P, 1, S, W + S] additive float mask over the prompt cache (width W) and the row."""
    spans: list[list[tuple[int, int]]]
    """Per row, per candidate: (start column, fed token count) in ``input_ids``."""


def pack_candidates(
    candidates: Sequence[Sequence[list[int]]],
    prompt_mask: torch.Tensor,
    dtype: torch.dtype,
    pad_id: int = 0,
) -> PackedCandidates:
    """Pack ``candidates[p]`` (token lists) after prompt ``p`` (mask row ``prompt_mask[p]``).

    Candidate token j (j >= 1) is predicted by the logits at the column holding token j - 1, and
    token 0 by the prompt's last logits, so a candidate's last token is never fed.
    """
    rows = prompt_mask.shape[0]
    width = prompt_mask.shape[1]
    spans: list[list[tuple[int, int]]] = []
    for cands in candidates:
        column, row_spans = 0, []
        for tokens in cands:
            fed = max(len(tokens) - 1, 0)
            row_spans.append((column, fed))
            column += fed
        spans.append(row_spans)
    size = max(1, max((s + n for row in spans for s, n in row), default=1))
    device = prompt_mask.device
    ids = torch.full((rows, size), pad_id, dtype=torch.long)
    positions = torch.zeros((rows, size), dtype=torch.long)
    allowed = torch.zeros((rows, size, width + size), dtype=torch.bool)
    lengths = prompt_mask.sum(dim=1).tolist()
    prompt_seen = prompt_mask.bool().cpu()
    for p, (cands, row_spans) in enumerate(zip(candidates, spans, strict=True)):
        allowed[p, :, :width] = prompt_seen[p]
        for tokens, (start, fed) in zip(cands, row_spans, strict=True):
            if not fed:
                continue
            end = start + fed
            ids[p, start:end] = torch.tensor(tokens[:fed])
            positions[p, start:end] = int(lengths[p]) + torch.arange(fed)
            allowed[p, start:end, width + start : width + end] = torch.ones(
                (fed, fed), dtype=torch.bool
            ).tril()
    # Unused columns attend to themselves only (an all-masked row would give NaN softmax).
    unused = ~allowed[:, :, width:].any(dim=2)
    diagonal = torch.eye(size, dtype=torch.bool).expand(rows, size, size)
    allowed[:, :, width:] |= diagonal & unused.unsqueeze(2)
    mask = torch.zeros((rows, 1, size, width + size), dtype=dtype)
    mask.masked_fill_(~allowed.unsqueeze(1), torch.finfo(dtype).min)
    return PackedCandidates(ids.to(device), positions.to(device), mask.to(device), spans)
