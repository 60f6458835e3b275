"""Candidate scoring over a :class:`~skillrl.policies.forward_pass.ForwardPass`.

Two ways, which must give the same log-probs (tests/skillrl/test_policy_fast_paths.py):

- :func:`score_plain` (the benchmarks' baseline): every prompt encoded as a left-padded batch,
  its KV cache copied once per candidate, candidates run as rows of their own;
- :func:`score_packed` (``fast``): each distinct prompt encoded once, on top of the longest
  prefix the prefix KV cache holds (:mod:`skillrl.policies.kv_reuse`), its distinct candidates
  packed side by side in one row with tree attention (:mod:`skillrl.policies.prompt_sharing`).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from skillrl.policies.base import ScoredContinuation
from skillrl.policies.forward_pass import EncodedBatch, ForwardPass
from skillrl.policies.kv_cache import cache_layers, cache_of
from skillrl.policies.prompt_sharing import dedupe, pack_candidates, select_rows

SCORE_CHUNK_ROWS = 64
"""Most candidate rows per scoring forward pass."""
SCORE_CHUNK_BYTES = 512 * 2**20
"""Memory the candidates' copies of the prompt KV cache may take per pass (baseline path): each
row copies its prompt's cache (about 45 KiB per prompt token for SmolLM2-135M in fp32), so long
prompts get fewer rows per pass instead of gigabytes of copies."""
PACKED_LOGITS_BYTES = 256 * 2**20
"""Most memory the packed candidates' logits may take per pass (fast path)."""


def score_plain(
    passes: ForwardPass, batch: EncodedBatch, continuations: list[list[str]]
) -> list[list[ScoredContinuation]]:
    """Baseline: the whole batch's prompts, then every candidate as its own row."""
    passes.count_encoded(batch.prompt_ids)
    tick = time.perf_counter()
    # Only the last prompt position's logits are needed (saves the vocab projection elsewhere).
    prompt_out = passes.forward(batch.input_ids, batch.attention_mask, None, None, keep=1)
    first_lp = torch.log_softmax(prompt_out.logits[:, -1, :].float(), dim=-1)
    cache = cache_of(prompt_out)
    passes.stats.score_prefill_seconds += time.perf_counter() - tick
    tick = time.perf_counter()
    rows = [(i, text) for i, cands in enumerate(continuations) for text in cands]
    row_bytes = sum(
        (k[0].numel() * k.element_size()) + (v[0].numel() * v.element_size())
        for k, v in cache_layers(cache)
    )
    per_pass = max(1, min(SCORE_CHUNK_ROWS, SCORE_CHUNK_BYTES // max(row_bytes, 1)))
    scored: list[ScoredContinuation] = []
    for start in range(0, len(rows), per_pass):
        chunk = rows[start : start + per_pass]
        scored.extend(_score_chunk(passes, chunk, batch, first_lp, cache))
    passes.stats.score_candidates_seconds += time.perf_counter() - tick
    result: list[list[ScoredContinuation]] = []
    offset = 0
    for cands in continuations:
        result.append(scored[offset : offset + len(cands)])
        offset += len(cands)
    return result


def _score_chunk(
    passes: ForwardPass,
    chunk: list[tuple[int, str]],
    batch: EncodedBatch,
    first_lp: torch.Tensor,
    cache: Any,
) -> list[ScoredContinuation]:
    from transformers import DynamicCache

    device = passes.device
    index = torch.tensor([i for i, _ in chunk], device=device)
    cand_ids = [passes.token_ids(t) or [0] for _, t in chunk]
    width = max(len(c) for c in cand_ids)
    ids = torch.tensor([c + [0] * (width - len(c)) for c in cand_ids], device=device)
    cand_mask = torch.tensor(
        [[1] * len(c) + [0] * (width - len(c)) for c in cand_ids], device=device
    )
    prompt_mask = batch.attention_mask[index]
    mask = torch.cat([prompt_mask, cand_mask], dim=1)
    positions = prompt_mask.sum(dim=1, keepdim=True) + torch.arange(width, device=device)
    layers = cache_layers(cache)
    selected = DynamicCache(ddp_cache_data=[(k[index], v[index]) for k, v in layers])
    passes.stats.candidate_tokens += sum(len(c) for c in cand_ids)
    out = passes.forward(ids, mask, positions, selected)
    lp = torch.log_softmax(out.logits.float(), dim=-1)
    scored = []
    for row, ((conv, text), tokens) in enumerate(zip(chunk, cand_ids, strict=True)):
        token_lps = [first_lp[conv, tokens[0]].item()]
        token_lps += [lp[row, j - 1, tokens[j]].item() for j in range(1, len(tokens))]
        scored.append(
            ScoredContinuation(
                text=text,
                logprob=float(sum(token_lps)),
                prompt_token_ids=list(batch.prompt_ids[conv]),
                token_ids=list(tokens),
                token_logprobs=token_lps,
            )
        )
    return scored


def score_packed(
    passes: ForwardPass, batch: EncodedBatch, continuations: list[list[str]]
) -> list[list[ScoredContinuation]]:
    """Each distinct prompt once (on its cached prefix); its candidates packed in one row."""
    groups = dedupe([tuple(row) for row in batch.prompt_ids])
    distinct = [batch.prompt_ids[i] for i in groups.unique]
    tick = time.perf_counter()
    prompt_out, mask = passes.prefill(distinct)
    first_lp = torch.log_softmax(prompt_out.logits[:, -1, :].float(), dim=-1)
    cache = cache_of(prompt_out)
    passes.stats.score_prefill_seconds += time.perf_counter() - tick
    tick = time.perf_counter()
    # Candidate texts per distinct prompt (copies of a prompt may list different candidates).
    texts: list[dict[str, list[int]]] = [{} for _ in groups.unique]
    for row, cands in enumerate(continuations):
        known = texts[groups.index[row]]
        for text in cands:
            if text not in known:
                known[text] = passes.token_ids(text) or [0]
    lps = _packed_logprobs(passes, mask, [list(t.values()) for t in texts], first_lp, cache)
    passes.stats.score_candidates_seconds += time.perf_counter() - tick
    found = [dict(zip(t, row, strict=True)) for t, row in zip(texts, lps, strict=True)]
    result = []
    for row, cands in enumerate(continuations):
        u = groups.index[row]
        result.append(
            [
                ScoredContinuation(
                    text=text,
                    logprob=float(sum(found[u][text])),
                    prompt_token_ids=list(batch.prompt_ids[row]),
                    token_ids=list(texts[u][text]),
                    token_logprobs=list(found[u][text]),
                )
                for text in cands
            ]
        )
    return result


def _packed_logprobs(
    passes: ForwardPass,
    prompt_mask: torch.Tensor,
    candidates: list[list[list[int]]],
    first_lp: torch.Tensor,
    cache: Any,
) -> list[list[list[float]]]:
    """Per-token log-probs of every candidate of every prompt (packed, tree attention).

    ``prompt_mask``: the prompts' attention mask over the columns of ``cache``.
    """
    vocab = first_lp.shape[1]
    longest = max(sum(max(len(c) - 1, 0) for c in cands) for cands in candidates)
    per_pass = max(1, PACKED_LOGITS_BYTES // max(1, 4 * vocab * max(longest, 1)))
    out_rows: list[list[list[float]]] = []
    dtype = next(passes.model.parameters()).dtype
    for start in range(0, len(candidates), per_pass):
        rows = list(range(start, min(start + per_pass, len(candidates))))
        part = cache if len(rows) == len(candidates) else select_rows(cache, rows)
        packed = pack_candidates([candidates[r] for r in rows], prompt_mask[rows], dtype)
        passes.stats.candidate_tokens += int(sum(n for row in packed.spans for _, n in row))
        out = passes.forward(packed.input_ids, packed.attention_mask, packed.position_ids, part)
        lp = torch.log_softmax(out.logits.float(), dim=-1)
        for local, r in enumerate(rows):
            scored = []
            for tokens, (column, fed) in zip(candidates[r], packed.spans[local], strict=True):
                token_lps = [first_lp[r, tokens[0]].item()]
                if fed:
                    picked = torch.tensor(tokens[1:], device=lp.device).unsqueeze(1)
                    block = lp[local, column : column + fed]
                    token_lps += block.gather(1, picked)[:, 0].tolist()
                scored.append(token_lps)
            out_rows.append(scored)
    return out_rows
