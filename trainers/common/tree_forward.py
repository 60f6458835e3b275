"""Forward a micro-batch as its prefix tree, gradients included: each distinct prefix runs once.

:mod:`trainers.common.prefix_tree` cuts the turns into segments and orders them into passes. Each
pass runs its segments as rows on top of their ancestors' keys and values: a row's past is its
ancestors' cached keys and values laid end to end (left-padded to the pass's longest past,
masked), its positions continue from its segment's start, and its own tokens are right-padded
(padding comes after every real token, so causal attention keeps it out of real positions).
The past is still attached to the autograd graph, so backward sums every turn's gradient into
the one pass that computed a shared prefix: the loss and gradients are those of the plain batch
to float rounding (tests/trainers/test_grpo_prefix_tree.py, on a tiny model and on SmolLM2).

The LM head runs only where a turn reads logits (``logits_to_keep`` as a boolean mask); a
position that several turns share is projected once and read by each.

Why not transformers' own prefix caching: its caches are for generation under ``no_grad``;
training through a cache needs the rows' view of it built by hand, as here.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch

from skillrl.policies.kv_cache import cache_keyword, cache_layers, cache_of
from trainers.common.prefix_tree import PrefixTree, fold_short, forward_order

_Layers = list[tuple[torch.Tensor, torch.Tensor]]
"""Per layer, a segment's (keys, values), each [heads, tokens, dim]."""


def tree_logits(
    model: Any,
    tree: PrefixTree,
    wanted: Sequence[tuple[int, int]],
) -> torch.Tensor:
    """Logits [len(wanted), V] at each ``(turn, position)`` of ``wanted``, the tree run once.

    The passes run the model's decoder body; the token embedding and the LM head run once for
    the whole tree, outside the passes: per pass they would each add a dense gradient of the
    whole vocabulary matrix (49,152 x 576 for SmolLM2), however few tokens the pass has.
    Shared segments too short for a pass of their own run inside their children
    (:func:`~trainers.common.prefix_tree.fold_short`).
    """
    tree = fold_short(tree)
    where = [tree.locate(turn, position) for turn, position in wanted]
    needed: dict[int, set[int]] = {}
    for segment, offset in where:
        needed.setdefault(segment, set()).add(offset)
    body, head, embed = _parts(model)
    device = head.weight.device
    embeds = embed(_to(torch.tensor([t for s in tree.segments for t in s.tokens]), device))
    # Where each segment's tokens start in ``embeds`` (segments laid end to end).
    firsts = [0, *itertools.accumulate(len(s.tokens) for s in tree.segments)][:-1]
    states: dict[int, _Layers] = {}
    found: dict[tuple[int, int], int] = {}
    pieces: list[torch.Tensor] = []
    done = 0
    for rows in forward_order(tree):
        # The kept positions are known on the host: reading them back from the device (a
        # nonzero, a boolean index) would make the host wait for the pass on every pass.
        kept = _kept_positions(tree, rows, needed)
        hidden = _run_pass(body, tree, rows, states, embeds, firsts, device)
        width = hidden.shape[1]
        for flat, (row, offset) in enumerate(kept):
            found[(rows[row], offset)] = done + flat
        done += len(kept)
        at = torch.tensor([row * width + offset for row, offset in kept], dtype=torch.long)
        pieces.append(hidden.flatten(0, 1).index_select(0, _to(at, device)))
    table = torch.cat(pieces)
    index = _to(torch.tensor([found[key] for key in where], dtype=torch.long), device)
    return head(table.index_select(0, index))


def labelled_logits(model: Any, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Logits [K, V] at a batch's K labelled positions, its rows run as one prefix tree.

    ``input_ids`` (batch, length) are right-padded rows; ``labels`` (batch, length - 1) are
    already shifted: position t of row i predicts ``labels[i, t]``, ``-100`` where nothing is
    predicted. The K rows come in ``labels[labels != -100]``'s order.
    """
    tree, wanted = labelled_tree(input_ids, labels)
    return tree_logits(model, tree, wanted)


def labelled_tree(
    input_ids: torch.Tensor, labels: torch.Tensor
) -> tuple[PrefixTree, list[tuple[int, int]]]:
    """Return the prefix tree of a batch's rows and the (turn, position) of each labelled one.

    A row enters the tree up to its last labelled position (what follows feeds no prediction);
    a row without labels not at all, so padding never does.
    """
    wanted = (labels != -100).nonzero().tolist()  # row-major: the order of a boolean index
    last: dict[int, int] = {}
    for row, position in wanted:
        last[row] = position
    rows = sorted(last)
    turn = {row: k for k, row in enumerate(rows)}
    ids = input_ids.tolist()
    tree = PrefixTree.build([ids[row][: last[row] + 1] for row in rows])
    return tree, [(turn[row], position) for row, position in wanted]


def _to(values: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Copy a host-built tensor to ``device`` without the host waiting for the device.

    A plain copy to CUDA from pageable memory waits for the stream to drain; from pinned memory
    with ``non_blocking`` it is queued behind the work already launched.
    """
    if device.type != "cuda":
        return values.to(device)
    return values.pin_memory().to(device, non_blocking=True)


def _parts(model: Any) -> tuple[Any, Any, Any]:
    """Return the decoder body, LM head and token embedding of ``model`` (through compile/peft)."""
    inner = getattr(model, "_orig_mod", model)  # torch.compile
    return inner.get_decoder(), inner.get_output_embeddings(), inner.get_input_embeddings()


def _kept_positions(
    tree: PrefixTree, rows: list[int], needed: dict[int, set[int]]
) -> list[tuple[int, int]]:
    """(row, offset) of the pass's positions that feed a logit, row-major (a boolean's order)."""
    return [
        (row, offset) for row, index in enumerate(rows) for offset in sorted(needed.get(index, ()))
    ]


def _run_pass(
    body: Any,
    tree: PrefixTree,
    rows: list[int],
    states: dict[int, _Layers],
    embeds: torch.Tensor,
    firsts: list[int],
    device: torch.device,
) -> torch.Tensor:
    """Run segments ``rows`` on their ancestors' states; store theirs; return hidden states."""
    segments = [tree.segments[i] for i in rows]
    width = max(len(s.tokens) for s in segments)
    past = max(s.start for s in segments)
    # Right padding reads the segment's own first embedding: any finite vector will do, and
    # causal attention keeps the padding out of every real position.
    take = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), past + width), dtype=torch.long)
    for row, (index, segment) in enumerate(zip(rows, segments, strict=True)):
        first = firsts[index]
        take[row] = first
        take[row, : len(segment.tokens)] = torch.arange(first, first + len(segment.tokens))
        mask[row, past - segment.start : past + len(segment.tokens)] = 1
    starts = torch.tensor([s.start for s in segments]).unsqueeze(1)
    extra: dict[str, Any] = {}
    if past:
        extra[cache_keyword(body)] = _past_cache(tree, rows, states, past)
    output = body(
        inputs_embeds=embeds[_to(take, device)],
        attention_mask=_to(mask, device),
        position_ids=_to(starts + torch.arange(width), device),
        use_cache=True,
        **extra,
    )
    layers = cache_layers(cache_of(output))
    for row, (index, segment) in enumerate(zip(rows, segments, strict=True)):
        span = slice(past, past + len(segment.tokens))
        states[index] = [(k[row, :, span], v[row, :, span]) for k, v in layers]
    return output.last_hidden_state


def _past_cache(tree: PrefixTree, rows: list[int], states: dict[int, _Layers], past: int) -> Any:
    """Build a ``DynamicCache`` whose row i is segment rows[i]'s ancestors' states, left-padded."""
    from transformers import DynamicCache

    chains = [tree.ancestors(i) for i in rows]
    used = sorted({a for chain in chains for a in chain})
    # Every ancestor's states laid end to end in a pool, then a zero slot for the padding; row
    # i's past gathers its chain's positions, left-padded with the zero slot. Two operations
    # per layer and side, however many rows (not a concatenation per row).
    lengths = {a: len(tree.segments[a].tokens) for a in used}
    offsets = [0, *itertools.accumulate(lengths[a] for a in used)]
    firsts = dict(zip(used, offsets[:-1], strict=True))
    zero = offsets[-1]
    index = torch.full((len(rows), past), zero, dtype=torch.long)
    for row, (segment, chain) in enumerate(zip(rows, chains, strict=True)):
        start = past - tree.segments[segment].start
        positions = [p for a in chain for p in range(firsts[a], firsts[a] + lengths[a])]
        index[row, start:] = torch.tensor(positions, dtype=torch.long)
    index = _to(index, states[used[0]][0][0].device)
    data = []
    for layer in range(len(states[used[0]])):
        pair = []
        for side in (0, 1):
            parts = [states[a][layer][side] for a in used]
            first = parts[0]
            parts.append(first.new_zeros((first.shape[0], 1, first.shape[2])))
            pool = torch.cat(parts, dim=1)  # [heads, tokens + 1, dim]
            pair.append(pool[:, index].transpose(0, 1))  # [rows, heads, past, dim]
        data.append((pair[0], pair[1]))
    return DynamicCache(ddp_cache_data=data)
