"""Reuse the KV cache of prompt prefixes across calls (keep each episode's cache).

A turn's prompt starts with what stays the same for the whole episode (system message, then the
task; see :mod:`skillrl.prompts.builder`), and often with more (the same skills, the same history
lines). :class:`PrefixKVCache` remembers the KV cache of recently encoded prompts, keyed by their
token ids; a later prompt takes the longest prefix it shares with any of them (its own episode's
previous turn, a sibling episode of its GRPO group, or just the system message that every prompt
of an environment shares) and the model computes only the rest. Keys of a position depend only
on the tokens before it (causal attention), so a cached prompt's first ``L`` positions are exactly
the KV of any prompt that starts with the same ``L`` tokens: no episode ids or API changes are
needed, and a batch-wide or group-wide shared prefix is computed once and then found by all.

Measured on expert WebShop episodes with SmolLM2's tokenizer (8 test goals, 31 turn pairs):
without skills a prompt holds 431 tokens on average, of which 135 (31%) equal the previous
turn's from the start; with the seeded bank's skills 645 tokens, 267 (41%) reused. Prompts of
different goals share only the 82-token system message.

The cache is invalidated whenever the model's weights change (a GRPO step updates them in place:
every parameter's version counter is part of the key), and it is bounded by bytes (least recently
used entries go first). Whole prompts are kept (the next turn's shared length is not known
yet); if more distinct prompts run per call than the budget holds, each is evicted before its
episode's next turn and reuse quietly stops, so the budget must exceed the rollout's parallel
episodes x prompt size (16 x 650 tokens x 45 KiB = 460 MiB for SmolLM2 in fp32).

:func:`assemble` lays several rows' cached prefixes and new suffixes out for one batched forward
pass: each row is ``[pad, prefix, pad, suffix]`` with a 2D attention mask
that hides both pads and explicit position ids that count only real tokens.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from skillrl_core.errors import ConfigError

logger = logging.getLogger(__name__)

Layers = list[tuple[torch.Tensor, torch.Tensor]]
"""Per transformer layer (keys, values), each ``[heads, tokens, dim]`` for one prompt."""

DEFAULT_BUDGET_BYTES = 1024 * 2**20
"""Default memory for cached prefixes: SmolLM2-135M in fp32 takes about 45 KiB per token, so
1 GiB holds about 23,000 prompt tokens (some 35 WebShop prompts of 650 tokens)."""
MIN_REUSE_TOKENS = 16
"""Shorter shared prefixes are not worth a differently laid-out batch."""


def weights_version(model: Any) -> tuple[int, ...]:
    """Return a key that changes whenever any parameter is changed in place or replaced.

    Optimizer steps and ``load_state_dict`` bump each tensor's version counter; swapping a
    parameter (``.to()``, LoRA merging) changes its storage pointer.
    """
    params = list(model.parameters())
    return (
        int(model.training),
        len(params),
        sum(p._version for p in params),
        sum(p.data_ptr() % 1_000_003 for p in params),
    )


@dataclass
class _Entry:
    ids: torch.Tensor
    """The prompt's token ids (1D, on the CPU), for prefix comparison."""
    layers: Layers
    bytes: int


@dataclass
class Hit:
    """The longest cached prefix of one prompt."""

    length: int
    """Tokens of the prompt covered by the cache (0: none)."""
    layers: Layers | None
    """Per-layer (keys, values) of at least ``length`` positions (None when ``length`` is 0)."""


class PrefixKVCache:
    """Least-recently-used map from encoded prompts to their KV cache, bounded by bytes."""

    def __init__(
        self, budget_bytes: int = DEFAULT_BUDGET_BYTES, min_reuse: int = MIN_REUSE_TOKENS
    ) -> None:
        if budget_bytes < 0:
            raise ConfigError(f"budget_bytes ({budget_bytes}) must be >= 0")
        if min_reuse < 1:
            raise ConfigError(f"min_reuse ({min_reuse}) must be at least 1")
        self.budget_bytes = budget_bytes
        self.min_reuse = min_reuse
        self._entries: OrderedDict[tuple[int, ...], _Entry] = OrderedDict()
        self._version: tuple[int, ...] | None = None
        self.bytes = 0
        """Memory the cached keys and values take now."""

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()
        self.bytes = 0

    def check_version(self, version: tuple[int, ...]) -> None:
        """Forget everything if the weights changed since the entries were computed."""
        if version != self._version:
            if self._entries:
                logger.debug("model weights changed: dropping %d cached prefixes", len(self))
            self.clear()
            self._version = version

    def lookup(self, ids: Sequence[int]) -> Hit:
        """Longest cached prefix of ``ids``, leaving at least the last token to compute.

        The last token is always computed because its logits are what the caller needs.
        """
        limit = len(ids) - 1
        if limit < self.min_reuse or not self._entries:
            return Hit(0, None)
        query = torch.tensor(list(ids), dtype=torch.long)
        best_key, best = None, 0
        for key, entry in self._entries.items():
            width = min(limit, entry.ids.numel())
            if width <= best:
                continue
            same = query[:width] == entry.ids[:width]
            length = width if bool(same.all()) else int((~same).int().argmax())
            if length > best:
                best_key, best = key, length
        if best_key is None or best < self.min_reuse:
            return Hit(0, None)
        self._entries.move_to_end(best_key)
        return Hit(best, self._entries[best_key].layers)

    def store(self, ids: Sequence[int], layers: Layers) -> None:
        """Remember ``layers`` (the KV of all of ``ids``), evicting the least recently used."""
        key = tuple(ids)
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        if size > self.budget_bytes or len(key) < self.min_reuse:
            return
        if key in self._entries:
            self._entries.move_to_end(key)
            return
        query = torch.tensor(key, dtype=torch.long)
        for old_key in [k for k, e in self._entries.items() if e.ids.numel() < len(key)]:
            # An entry that is a prefix of the new one can only give shorter matches.
            old = self._entries[old_key].ids
            if bool((query[: old.numel()] == old).all()):
                self._drop(old_key)
        self._entries[key] = _Entry(query, layers, size)
        self.bytes += size
        while self.bytes > self.budget_bytes:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: tuple[int, ...]) -> None:
        self.bytes -= self._entries.pop(key).bytes


@dataclass
class Assembled:
    """Rows of cached prefixes and new suffixes laid out for one forward pass."""

    input_ids: torch.Tensor
    """[B, S]: each row's uncached tokens, left-padded."""
    attention_mask: torch.Tensor
    """[B, P + S]: over the cached columns (P) and the new ones; 1 marks a real token."""
    position_ids: torch.Tensor
    """[B, S]: each new token's index in its prompt."""
    past: Layers | None
    """Per layer (keys, values) of shape [B, heads, P, dim] (None when no row reuses anything)."""


def assemble(prompts: Sequence[Sequence[int]], hits: Sequence[Hit], pad_id: int) -> Assembled:
    """Lay out ``prompts`` whose first ``hits[i].length`` tokens come from the cache.

    Row ``i`` is ``[pad, prefix_i, pad, suffix_i]`` over ``P + S`` columns: cached prefixes are
    left-padded to the longest one (``P``), uncached suffixes to the longest one (``S``), so each
    row's last column is its last token, as left padding keeps it.
    """
    lengths = [h.length for h in hits]
    width_p = max(lengths)
    suffixes = [list(p[n:]) for p, n in zip(prompts, lengths, strict=True)]
    width_s = max(len(s) for s in suffixes)
    rows = len(prompts)
    new_ids = torch.full((rows, width_s), pad_id, dtype=torch.long)
    mask = torch.zeros((rows, width_p + width_s), dtype=torch.long)
    positions = torch.zeros((rows, width_s), dtype=torch.long)
    for r, (n, suffix) in enumerate(zip(lengths, suffixes, strict=True)):
        mask[r, width_p - n : width_p] = 1
        new_ids[r, width_s - len(suffix) :] = torch.tensor(suffix)
        mask[r, width_p + width_s - len(suffix) :] = 1
        positions[r, width_s - len(suffix) :] = n + torch.arange(len(suffix))
    past = None
    if width_p:
        template = next(h.layers for h in hits if h.layers is not None)
        past = []
        for layer, (k0, v0) in enumerate(template):
            keys = k0.new_zeros((rows, k0.shape[0], width_p, k0.shape[2]))
            values = v0.new_zeros((rows, v0.shape[0], width_p, v0.shape[2]))
            for r, hit in enumerate(hits):
                if hit.length:
                    k, v = hit.layers[layer]
                    keys[r, :, width_p - hit.length :] = k[:, : hit.length]
                    values[r, :, width_p - hit.length :] = v[:, : hit.length]
            past.append((keys, values))
    return Assembled(new_ids, mask, positions, past)


def row_layers(layers: Layers, row: int, mask_row: torch.Tensor) -> Layers:
    """One row's KV at its real (unmasked) columns, as contiguous copies ``[heads, T, dim]``."""
    keep = mask_row.bool()
    return [(k[row][:, keep].clone(), v[row][:, keep].clone()) for k, v in layers]
