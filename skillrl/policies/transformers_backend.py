"""In-process policy on transformers: batched generation with log-probs, batched scoring.

``.model`` is a normal (not GGUF-quantized) ``PreTrainedModel`` that the GRPO trainer updates in
place; generation and scoring always use its current weights (the prefix KV cache is dropped
whenever they change).

Log-probs are computed from the raw logits divided by the sampling temperature (raw when greedy),
i.e. under the distribution tokens were drawn from before top-p truncation, which is what the GRPO
ratio needs as "old" log-probs.

The model, tokenizer, prefix KV cache and counters belong to one
:class:`~skillrl.policies.forward_pass.ForwardPass`, which this policy generates with and
:mod:`~skillrl.policies.transformers_scoring` scores with. Loading lives in
:mod:`~skillrl.policies.transformers_loading`, prefix reuse in :mod:`~skillrl.policies.kv_reuse`.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

import torch

from skillrl.policies.base import (
    Conversation,
    Generation,
    SamplingConfig,
    ScoredContinuation,
)
from skillrl.policies.config import PolicyConfig
from skillrl.policies.forward_pass import EncodedBatch, ForwardPass
from skillrl.policies.kv_cache import cache_of
from skillrl.policies.kv_reuse import (
    DEFAULT_BUDGET_BYTES,
    PrefixKVCache,
)
from skillrl.policies.model_cache import Progress
from skillrl.policies.policy_stats import PolicyStats
from skillrl.policies.prompt_sharing import (
    Dedupe,
    dedupe,
    select_rows,
)
from skillrl.policies.transformers_loading import load_causal_lm, pick_device, pick_dtype
from skillrl.policies.transformers_scoring import score_packed, score_plain
from skillrl_core.errors import ModelLoadError

logger = logging.getLogger(__name__)


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
        self.passes = ForwardPass(
            model, tokenizer, fast=fast, prefix_cache_bytes=prefix_cache_bytes
        )
        """The model, tokenizer, prefix cache and counters generation and scoring share."""
        self.name = name

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

    # -- what the forward pass owns, under the names callers use -------------------------------
    @property
    def model(self) -> Any:
        """The causal LM (the trainer updates it in place, or sets a new one)."""
        return self.passes.model

    @model.setter
    def model(self, model: Any) -> None:
        self.passes.model = model

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer."""
        return self.passes.tokenizer

    @property
    def fast(self) -> bool:
        """Whether the fast paths run (:attr:`ForwardPass.fast`)."""
        return self.passes.fast

    @fast.setter
    def fast(self, fast: bool) -> None:
        self.passes.fast = fast

    @property
    def prefix_cache(self) -> PrefixKVCache | None:
        """The prompt-prefix KV cache (None: no reuse)."""
        return self.passes.prefix_cache

    @prefix_cache.setter
    def prefix_cache(self, cache: PrefixKVCache | None) -> None:
        self.passes.prefix_cache = cache

    @property
    def stats(self) -> PolicyStats:
        """Counters of the work done (tokens encoded, reused, generated; seconds)."""
        return self.passes.stats

    @property
    def device(self) -> torch.device:
        """Device the model's weights are on."""
        return self.passes.device

    def count_tokens(self, text: str) -> int:
        """Count the tokens of ``text`` (no special tokens added)."""
        return self.passes.count_tokens(text)

    def token_ids(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return self.passes.token_ids(text)

    def render(self, conversation: Conversation) -> str:
        """Render a conversation as prompt text (an assistant last message is continued)."""
        return self.passes.render(conversation)

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
        batch = self.passes.encode(conversations)
        self.stats.prompt_rows += len(conversations)
        if not self.fast or min(len(p) for p in batch.prompt_ids) < 2:
            self.passes.count_encoded(batch.prompt_ids)
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
            out, past_mask = self.passes.prefill(distinct)
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
            extra[self.passes.cache_kwarg] = cache
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
        batch = self.passes.encode(conversations)
        self.stats.prompt_rows += len(conversations)
        if self.fast:
            return score_packed(self.passes, batch, continuations)
        return score_plain(self.passes, batch, continuations)


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(configured)
    return {i for i in ids if i is not None}
