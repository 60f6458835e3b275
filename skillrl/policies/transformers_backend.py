"""In-process policy on transformers: batched generation with log-probs, batched scoring.

``.model`` is a normal (not GGUF-quantized) ``PreTrainedModel`` that the GRPO trainer updates in
place; generation and scoring always use its current weights.

Log-probs are computed from the raw logits divided by the sampling temperature (raw when greedy),
i.e. under the distribution tokens were drawn from before top-p truncation, which is what the GRPO
ratio needs as "old" log-probs.
"""

from __future__ import annotations

import copy
import inspect
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from skillrl.policies.base import (
    Conversation,
    Generation,
    SamplingConfig,
    ScoredContinuation,
    render_chat,
)
from skillrl.policies.config import EMBEDDED_MODEL, PolicyConfig
from skillrl.policies.model_cache import (
    Progress,
    ensure_embedded_checkpoint,
    ensure_gguf_checkpoint,
)
from skillrl.policies.prefix_cache import (
    Dedupe,
    cache_layers,
    dedupe,
    pack_candidates,
    select_rows,
)
from skillrl_core.errors import ModelLoadError

logger = logging.getLogger(__name__)

SCORE_CHUNK_ROWS = 64
"""Most candidate rows per scoring forward pass."""
SCORE_CHUNK_BYTES = 512 * 2**20
"""Memory the candidates' copies of the prompt KV cache may take per pass (baseline path): each
row copies its prompt's cache (about 45 KiB per prompt token for SmolLM2-135M in fp32), so long
prompts get fewer rows per pass instead of gigabytes of copies."""
PACKED_LOGITS_BYTES = 256 * 2**20
"""Most memory the packed candidates' logits may take per pass (fast path)."""


@dataclass
class _Batch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    prompt_ids: list[list[int]]

    def rows(self, index: list[int]) -> _Batch:
        """Return the sub-batch of ``index`` (same width: the widest rows stay the widest)."""
        return _Batch(
            self.input_ids[index],
            self.attention_mask[index],
            [self.prompt_ids[i] for i in index],
        )


@dataclass
class PolicyStats:
    """Where the policy's time went since the last :meth:`reset` (seconds and token counts)."""

    prefill_seconds: float = 0.0
    """Prompt forward passes of generation (fast path; the baseline counts them as decoding)."""
    decode_seconds: float = 0.0
    """``model.generate`` after the prompt (all of ``generate`` on the baseline path)."""
    score_prefill_seconds: float = 0.0
    """Prompt forward passes of candidate scoring."""
    score_candidates_seconds: float = 0.0
    """Candidate forward passes and their log-probs."""
    prompt_rows: int = 0
    """Prompts asked for (generation and scoring)."""
    computed_rows: int = 0
    """Prompts actually encoded (fewer than ``prompt_rows`` when duplicates were shared)."""
    prefill_tokens: int = 0
    """Real (unpadded) prompt tokens encoded."""
    candidate_tokens: int = 0
    """Candidate tokens fed to the model."""
    generated_tokens: int = 0
    """Generated tokens of the rows actually decoded (copies of a greedy row not counted)."""
    prefix_shareable_tokens: int = 0
    """Prompt tokens a batch-wide shared prefix would have saved: per call, the longest prefix
    common to all encoded prompts times (encoded prompts - 1). Measures whether computing that
    prefix once would pay (it is not done: see ``skillrl.policies.prefix_cache``)."""

    def reset(self) -> None:
        """Zero every field."""
        for key, value in vars(PolicyStats()).items():
            setattr(self, key, value)

    def to_dict(self) -> dict[str, float]:
        """Plain numbers."""
        return {k: float(v) for k, v in vars(self).items()}


class TransformersPolicy:
    """A chat model run in-process by transformers."""

    def __init__(
        self, model: Any, tokenizer: Any, name: str = "transformers", *, fast: bool = True
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.fast = fast
        """Share work between rows (identical prompts encoded once, candidates packed into one
        row per prompt); False runs the plain batched path (the benchmarks' baseline)."""
        self.stats = PolicyStats()
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        forward = inspect.signature(model.forward).parameters
        # transformers 5.2x renamed ``past_key_values`` to ``cache``; support both.
        self._cache_kwarg = "cache" if "cache" in forward else "past_key_values"

    @classmethod
    def load(cls, config: PolicyConfig, progress: Progress | None = None) -> TransformersPolicy:
        """Load ``config.model`` (``embedded``, a folder, a ``.gguf`` file or a hub id)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if config.threads:
            torch.set_num_threads(config.threads)
        source = resolve_model_source(config.model, progress)
        device = _pick_device(config.device)
        dtype = pick_dtype(config.dtype, device)
        if progress:
            progress(f"loading {config.model} ({dtype}, {device})")
        try:
            tokenizer = AutoTokenizer.from_pretrained(source)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
        except (OSError, ValueError) as error:
            raise ModelLoadError(
                f"could not load model {config.model!r} from {source}: {error} "
                "(models are never downloaded at run time unless HF_HUB_OFFLINE is unset)"
            ) from error
        model.to(device).eval()
        return cls(model, tokenizer, name=f"transformers:{config.model}")

    @property
    def device(self) -> torch.device:
        """Device the model's weights are on."""
        return next(self.model.parameters()).device

    def count_tokens(self, text: str) -> int:
        """Count the tokens of ``text`` (no special tokens added)."""
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def render(self, conversation: Conversation) -> str:
        """Render a conversation as prompt text (an assistant last message is continued)."""
        return render_chat(self.tokenizer, conversation)

    def _encode(self, conversations: list[Conversation]) -> _Batch:
        texts = [self.render(c) for c in conversations]
        ids = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        width = max(len(row) for row in ids)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in ids], dtype=torch.long)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in ids], dtype=torch.long)
        return _Batch(input_ids.to(self.device), mask.to(self.device), ids)

    @torch.inference_mode()
    def generate(
        self, conversations: list[Conversation], sampling: SamplingConfig
    ) -> list[Generation]:
        """Generate for all conversations in one left-padded batch.

        Fast path: identical prompts are encoded once. Greedy copies of a prompt would decode
        the same tokens, so only distinct prompts are decoded and the results copied; sampled
        copies share the prompt's KV cache but each samples its own tokens.
        """
        if not conversations:
            return []
        batch = self._encode(conversations)
        self.stats.prompt_rows += len(conversations)
        if not self.fast:
            self._count_encoded(batch.prompt_ids)
            return self._generate(batch, sampling, None)
        groups = dedupe([tuple(row) for row in batch.prompt_ids])
        self._count_encoded([batch.prompt_ids[i] for i in groups.unique])
        if sampling.greedy and groups.saved:
            distinct = self._generate(
                batch.rows(groups.unique), sampling, dedupe(range(len(groups.unique)))
            )
            return [copy.deepcopy(distinct[j]) for j in groups.index]
        return self._generate(batch, sampling, groups)

    def _count_encoded(self, prompts: list[list[int]]) -> None:
        self.stats.computed_rows += len(prompts)
        self.stats.prefill_tokens += sum(len(r) for r in prompts)
        shared = len(os.path.commonprefix(prompts)) if len(prompts) > 1 else 0
        self.stats.prefix_shareable_tokens += shared * (len(prompts) - 1)

    def _generate(
        self, batch: _Batch, sampling: SamplingConfig, groups: Dedupe | None
    ) -> list[Generation]:
        """Run ``model.generate`` (with ``groups``: on a prefilled KV cache).

        The cache holds the distinct prompts' all-but-last tokens, computed here once per
        distinct prompt and copied to each row that repeats it.
        """
        extra: dict[str, Any] = {}
        if groups is not None and batch.input_ids.shape[1] > 1:
            tick = time.perf_counter()
            distinct = batch.rows(groups.unique)
            out = self._forward(
                distinct.input_ids[:, :-1], distinct.attention_mask[:, :-1], None, None, keep=1
            )
            cache = _cache_of(out)
            if groups.saved:
                cache = select_rows(cache, groups.index)
            extra[self._cache_kwarg] = cache
            self.stats.prefill_seconds += time.perf_counter() - tick
        tick = time.perf_counter()
        kwargs: dict[str, Any] = {
            "max_new_tokens": sampling.max_new_tokens,
            "do_sample": not sampling.greedy,
            "pad_token_id": self.tokenizer.pad_token_id,
            "return_dict_in_generate": True,
            "output_logits": True,
        }
        if sampling.greedy:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        else:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=None)
            if sampling.seed is not None:
                torch.manual_seed(sampling.seed)
        if sampling.stop:
            kwargs.update(stop_strings=list(sampling.stop), tokenizer=self.tokenizer)
        out = self.model.generate(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, **kwargs, **extra
        )
        self.stats.decode_seconds += time.perf_counter() - tick
        new_tokens = out.sequences[:, batch.input_ids.shape[1] :]
        logits = torch.stack(out.logits, dim=1).float()  # (batch, steps, vocab)
        if not sampling.greedy:
            logits = logits / sampling.temperature
        logprobs = torch.log_softmax(logits, dim=-1)
        token_lp = logprobs.gather(-1, new_tokens.unsqueeze(-1)).squeeze(-1)
        finished = [
            self._finish(
                batch.prompt_ids[i], new_tokens[i].tolist(), token_lp[i].tolist(), sampling
            )
            for i in range(len(batch.prompt_ids))
        ]
        self.stats.generated_tokens += sum(len(g.completion_token_ids) for g in finished)
        return finished

    def _finish(
        self, prompt: list[int], tokens: list[int], lps: list[float], sampling: SamplingConfig
    ) -> Generation:
        """Cut padding after the end of a row; decide whether the row hit its length limit."""
        eos_ids = _eos_ids(self.model, self.tokenizer)
        end = next((i for i, t in enumerate(tokens) if t in eos_ids), None)
        if end is None:
            kept = tokens
            text = self.tokenizer.decode(kept, skip_special_tokens=True)
            stopped = any(text.endswith(s) for s in sampling.stop)
            reason = "stop" if stopped else "length"
        else:
            text = self.tokenizer.decode(tokens[:end], skip_special_tokens=True)
            # Rows that stopped on a stop string are padded with pad (== eos) ids afterwards;
            # only an eos the model itself produced belongs to the completion.
            by_stop = any(text.endswith(s) for s in sampling.stop)
            kept = tokens[:end] if by_stop else tokens[: end + 1]
            reason = "stop"
        return Generation(
            text=text,
            prompt_token_ids=list(prompt),
            completion_token_ids=kept,
            logprobs=lps[: len(kept)],
            finish_reason=reason,
        )

    def score_continuations(
        self, conversations: list[Conversation], continuations: list[list[str]]
    ) -> list[list[float]]:
        """Sum log-prob of every candidate of every conversation (one prompt pass, batched)."""
        detailed = self.score_continuations_detailed(conversations, continuations)
        return [[c.logprob for c in row] for row in detailed]

    @torch.inference_mode()
    def score_continuations_detailed(
        self, conversations: list[Conversation], continuations: list[list[str]]
    ) -> list[list[ScoredContinuation]]:
        """Score candidates with token ids and per-token log-probs (for training on the choice).

        Prompts run once as a left-padded batch; their KV cache is then copied once per candidate
        so candidates cost only their own few tokens.
        """
        if len(conversations) != len(continuations):
            raise ValueError(
                f"conversations ({len(conversations)}) and continuations "
                f"({len(continuations)}) must have the same length"
            )
        if not conversations:
            return []
        batch = self._encode(conversations)
        self.stats.prompt_rows += len(conversations)
        if self.fast:
            return self._score_packed(batch, continuations)
        self._count_encoded(batch.prompt_ids)
        tick = time.perf_counter()
        # Only the last prompt position's logits are needed (saves the vocab projection elsewhere).
        prompt_out = self._forward(batch.input_ids, batch.attention_mask, None, None, keep=1)
        first_lp = torch.log_softmax(prompt_out.logits[:, -1, :].float(), dim=-1)
        cache = _cache_of(prompt_out)
        self.stats.score_prefill_seconds += time.perf_counter() - tick
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
            scored.extend(self._score_chunk(chunk, batch, first_lp, cache))
        self.stats.score_candidates_seconds += time.perf_counter() - tick
        result: list[list[ScoredContinuation]] = []
        offset = 0
        for cands in continuations:
            result.append(scored[offset : offset + len(cands)])
            offset += len(cands)
        return result

    def _score_chunk(
        self, chunk: list[tuple[int, str]], batch: _Batch, first_lp: torch.Tensor, cache: Any
    ) -> list[ScoredContinuation]:
        from transformers import DynamicCache

        index = torch.tensor([i for i, _ in chunk], device=self.device)
        cand_ids = [
            self.tokenizer(t, add_special_tokens=False)["input_ids"] or [0] for _, t in chunk
        ]
        width = max(len(c) for c in cand_ids)
        ids = torch.tensor([c + [0] * (width - len(c)) for c in cand_ids], device=self.device)
        cand_mask = torch.tensor(
            [[1] * len(c) + [0] * (width - len(c)) for c in cand_ids], device=self.device
        )
        prompt_mask = batch.attention_mask[index]
        mask = torch.cat([prompt_mask, cand_mask], dim=1)
        positions = prompt_mask.sum(dim=1, keepdim=True) + torch.arange(width, device=self.device)
        layers = cache_layers(cache)
        selected = DynamicCache(ddp_cache_data=[(k[index], v[index]) for k, v in layers])
        self.stats.candidate_tokens += sum(len(c) for c in cand_ids)
        out = self._forward(ids, mask, positions, selected)
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

    def _score_packed(
        self, batch: _Batch, continuations: list[list[str]]
    ) -> list[list[ScoredContinuation]]:
        """Each distinct prompt once; its distinct candidates packed side by side in one row."""
        groups = dedupe([tuple(row) for row in batch.prompt_ids])
        distinct = batch.rows(groups.unique)
        self._count_encoded(distinct.prompt_ids)
        tick = time.perf_counter()
        prompt_out = self._forward(distinct.input_ids, distinct.attention_mask, None, None, keep=1)
        first_lp = torch.log_softmax(prompt_out.logits[:, -1, :].float(), dim=-1)
        cache = _cache_of(prompt_out)
        self.stats.score_prefill_seconds += time.perf_counter() - tick
        tick = time.perf_counter()
        # Candidate texts per distinct prompt (copies of a prompt may list different candidates).
        texts: list[dict[str, list[int]]] = [{} for _ in groups.unique]
        for row, cands in enumerate(continuations):
            known = texts[groups.index[row]]
            for text in cands:
                if text not in known:
                    known[text] = self.tokenizer(text, add_special_tokens=False)["input_ids"] or [0]
        lps = self._packed_logprobs(distinct, [list(t.values()) for t in texts], first_lp, cache)
        self.stats.score_candidates_seconds += time.perf_counter() - tick
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
        self,
        prompts: _Batch,
        candidates: list[list[list[int]]],
        first_lp: torch.Tensor,
        cache: Any,
    ) -> list[list[list[float]]]:
        """Per-token log-probs of every candidate of every prompt (packed, tree attention)."""
        vocab = first_lp.shape[1]
        longest = max(sum(max(len(c) - 1, 0) for c in cands) for cands in candidates)
        per_pass = max(1, PACKED_LOGITS_BYTES // max(1, 4 * vocab * max(longest, 1)))
        out_rows: list[list[list[float]]] = []
        dtype = next(self.model.parameters()).dtype
        for start in range(0, len(candidates), per_pass):
            rows = list(range(start, min(start + per_pass, len(candidates))))
            part = cache if len(rows) == len(candidates) else select_rows(cache, rows)
            packed = pack_candidates(
                [candidates[r] for r in rows], prompts.attention_mask[rows], dtype
            )
            self.stats.candidate_tokens += int(sum(n for row in packed.spans for _, n in row))
            out = self._forward(packed.input_ids, packed.attention_mask, packed.position_ids, part)
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

    def _forward(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor | None,
        cache: Any,
        keep: int = 0,
    ) -> Any:
        if positions is None:  # left padding: positions count only real tokens
            positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        kwargs: dict[str, Any] = {self._cache_kwarg: cache, "use_cache": True}
        if keep:
            kwargs["logits_to_keep"] = keep
        return self.model(input_ids=ids, attention_mask=mask, position_ids=positions, **kwargs)


def _cache_of(output: Any) -> Any:
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(configured)
    return {i for i in ids if i is not None}


def resolve_model_source(model: str, progress: Progress | None = None) -> str:
    """Turn ``model`` into something ``from_pretrained`` loads (a folder or a hub id).

    ``embedded`` and ``.gguf`` files resolve to their conversion in the per-user cache
    (``skillrl.policies.model_cache``).
    """
    if model == EMBEDDED_MODEL:
        return str(ensure_embedded_checkpoint(progress))
    path = Path(model).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return str(ensure_gguf_checkpoint(path, progress))
    if path.exists() and not path.is_dir():
        raise ModelLoadError(f"model path {path} is a file but not a .gguf model")
    if path.is_dir():
        return str(path)
    if model.startswith((".", "/", "~")) or model.count("/") > 1:
        raise ModelLoadError(f"model folder {model!r} does not exist")
    return model  # a hub id (resolved from the local hub cache when offline)


def _pick_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX); emulated bf16 is slower."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def pick_dtype(name: str, device: torch.device) -> torch.dtype:
    """Return the torch dtype for ``name`` on ``device`` (``auto``: bf16 only where fast)."""
    if name != "auto":
        return getattr(torch, name)
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    # Measured on the 2-core AVX2 dev machine: bf16 generation was ~5x slower than fp32
    # (no native bf16 units), so bf16 is used only where the CPU has them.
    return torch.bfloat16 if cpu_has_native_bf16() else torch.float32
