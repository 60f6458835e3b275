"""In-process policy on transformers: batched generation with log-probs, batched scoring.

``.model`` is a normal (not GGUF-quantized) ``PreTrainedModel`` that the GRPO trainer updates in
place; generation and scoring always use its current weights (the prefix KV cache is dropped
whenever they change).

Log-probs are computed from the raw logits divided by the sampling temperature (raw when greedy),
i.e. under the distribution tokens were drawn from before top-p truncation, which is what the GRPO
ratio needs as "old" log-probs.

Loading lives in :mod:`~skillrl.policies.transformers_loading`, candidate scoring in
:mod:`~skillrl.policies.transformers_scoring`, prefix reuse in :mod:`~skillrl.policies.kv_reuse`.
"""

from __future__ import annotations

import copy
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

import torch

from skillrl.policies.base import (
    Conversation,
    Generation,
    SamplingConfig,
    ScoredContinuation,
    render_chat,
)
from skillrl.policies.config import PolicyConfig
from skillrl.policies.kv_reuse import (
    DEFAULT_BUDGET_BYTES,
    Hit,
    PrefixKVCache,
    assemble,
    row_layers,
    weights_version,
)
from skillrl.policies.model_cache import Progress
from skillrl.policies.policy_stats import PolicyStats
from skillrl.policies.prefix_cache import (
    Dedupe,
    cache_keyword,
    cache_layers,
    dedupe,
    select_rows,
)
from skillrl.policies.transformers_loading import (
    cpu_has_native_bf16,
    load_causal_lm,
    pick_device,
    pick_dtype,
    resolve_model_source,
)
from skillrl.policies.transformers_scoring import cache_of, score_packed, score_plain
from skillrl_core.errors import ModelLoadError

__all__ = [
    "EncodedBatch",
    "PolicyStats",
    "TransformersPolicy",
    "cpu_has_native_bf16",
    "pick_dtype",
    "resolve_model_source",
]

logger = logging.getLogger(__name__)


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


class TransformersPolicy:
    """A chat model run in-process by transformers."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        name: str = "transformers",
        *,
        fast: bool = True,
        prefix_cache_bytes: int = DEFAULT_BUDGET_BYTES,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
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
        self._cache_kwarg = cache_keyword(model)

    @classmethod
    def load(cls, config: PolicyConfig, progress: Progress | None = None) -> TransformersPolicy:
        """Load ``config.model`` (``embedded``, a folder, a ``.gguf`` file or a hub id)."""
        if config.threads:
            torch.set_num_threads(config.threads)
        device = pick_device(config.device)
        dtype = pick_dtype(config.dtype, device)
        if progress:
            progress(f"loading {config.model} ({dtype}, {device})")
        try:
            tokenizer, model = load_causal_lm(config.model, dtype, progress)
        except (OSError, ValueError) as error:
            reason = " ".join(str(error).split())  # one line, as every refusal is
            raise ModelLoadError(
                f"could not load model {config.model!r}: {reason} "
                "(models are never downloaded at run time unless HF_HUB_OFFLINE is unset)"
            ) from error
        model.to(device).eval()
        return cls(
            model,
            tokenizer,
            name=f"transformers:{config.model}",
            prefix_cache_bytes=config.prefix_cache_mb * 2**20,
        )

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

    def _encode(self, conversations: list[Conversation]) -> EncodedBatch:
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

    @torch.inference_mode()
    def generate(
        self, conversations: list[Conversation], sampling: SamplingConfig
    ) -> list[Generation]:
        """Generate for all conversations in one left-padded batch.

        Fast path: identical prompts are encoded once, on top of their cached prefixes. Greedy
        copies of a prompt would decode the same tokens, so only distinct prompts are decoded
        and the results copied; sampled copies share the prompt's KV cache but each samples its
        own tokens.
        """
        if not conversations:
            return []
        batch = self._encode(conversations)
        self.stats.prompt_rows += len(conversations)
        if not self.fast or min(len(p) for p in batch.prompt_ids) < 2:
            self.count_encoded(batch.prompt_ids)
            return self._generate(batch, sampling, None)
        groups = dedupe([tuple(row) for row in batch.prompt_ids])
        if sampling.greedy and groups.saved:
            distinct = self._generate(
                batch.rows(groups.unique), sampling, dedupe(range(len(groups.unique)))
            )
            return [copy.deepcopy(distinct[j]) for j in groups.index]
        return self._generate(batch, sampling, groups)

    def _generate(
        self, batch: EncodedBatch, sampling: SamplingConfig, groups: Dedupe | None
    ) -> list[Generation]:
        """Run ``model.generate`` (with ``groups``: on a prefilled KV cache).

        The cache holds the distinct prompts' all-but-last tokens, computed here once per
        distinct prompt (on top of any cached prefix) and copied to each row that repeats it;
        ``generate`` then feeds only the last prompt token.
        """
        extra: dict[str, Any] = {}
        input_ids, mask = batch.input_ids, batch.attention_mask
        if groups is not None:
            tick = time.perf_counter()
            distinct = [batch.prompt_ids[i][:-1] for i in groups.unique]
            out, past_mask = self.prefill(distinct)
            cache = cache_of(out)
            pad = self.tokenizer.pad_token_id
            width = past_mask.shape[1]
            # Each row's tokens at the cache's columns (``generate`` reads only the last one,
            # stop strings may look back), then the last prompt token.
            past_ids = torch.full((len(distinct), width), pad, dtype=torch.long)
            for row, prompt in enumerate(distinct):
                real = past_mask[row].bool().cpu()
                past_ids[row, real] = torch.tensor(prompt, dtype=torch.long)
            past_ids = past_ids.to(self.device)
            if groups.saved:
                cache = select_rows(cache, groups.index)
            index = torch.tensor(groups.index, device=self.device)
            last = torch.tensor([[p[-1]] for p in batch.prompt_ids], device=self.device)
            input_ids = torch.cat([past_ids[index], last], dim=1)
            mask = torch.cat([past_mask[index], torch.ones_like(last)], dim=1)
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
        out = self.model.generate(input_ids=input_ids, attention_mask=mask, **kwargs, **extra)
        self.stats.decode_seconds += time.perf_counter() - tick
        new_tokens = out.sequences[:, input_ids.shape[1] :]
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

        Prompts run once as a batch and candidates cost only their own few tokens
        (:mod:`skillrl.policies.transformers_scoring`).
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
            return score_packed(self, batch, continuations)
        return score_plain(self, batch, continuations)

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
        kwargs: dict[str, Any] = {self._cache_kwarg: cache, "use_cache": True}
        if keep:
            kwargs["logits_to_keep"] = keep
        return self.model(input_ids=ids, attention_mask=mask, position_ids=positions, **kwargs)


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(configured)
    return {i for i in ids if i is not None}
