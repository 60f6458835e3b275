"""Rollouts from TRL's vLLM server, with the trainer's weights pushed to it after every update.

This is TRL's *server mode* reused, not rewritten: the user starts ``trl vllm-serve --model M``
(TRL 1.16 runs vLLM's own ``vllm serve`` with ``VLLM_SERVER_DEV_MODE=1``, the NCCL
weight-transfer engine and ``--logprobs-mode processed_logprobs``; it is deprecated in favour of
that ``vllm serve`` command line, which works the same) on GPU(s) of their choice, and
this policy talks to it through ``trl.generation.vllm_client.VLLMClient``. GRPO still updates an
in-process transformers model; :meth:`TRLVLLMServerPolicy.sync_weights` streams its parameters to
the server over NCCL (the communicator is opened lazily, on the first sync) and resets the
server's prefix cache so no cached KV of the old weights is reused.

Why this shape:

- Prompts are rendered *here* with the model's chat template and sent as token ids, so a trailing
  assistant message is continued exactly as in the other backends (constrained decoding relies on
  it) and the ids the trainer trains on are the ids the server saw.
- Stop strings are applied client-side, like the transformers backend: the completion ends with
  the token that completes the first stop string (kept), and the text is the decoding of the kept
  tokens, so text, token ids and log-probs always agree. The stop strings are also sent to the
  server so it stops generating early; the client-side cut is what counts.
- Log-probs are those of the sampled tokens under the temperature-scaled distribution (what the
  GRPO ratio needs as pi_old) only when the server runs with ``--logprobs-mode
  processed_logprobs``, which ``trl vllm-serve`` sets; a bare ``vllm serve`` reports raw ones.
  (With ``top_p < 1`` processed log-probs are taken after truncation, unlike the transformers
  backend's; training rollouts sample at ``top_p = 1``.)
- Candidate continuations are scored with ``VLLMClient.get_sequence_logprobs`` (prompt log-probs
  over prompt + candidate at temperature 1, i.e. raw log-probs, as the transformers backend).
- LoRA (peft) models are synced the way TRL syncs them: ``merge_adapter()`` in place, stream the
  merged base weights under the names vLLM expects, ``unmerge_adapter()``. No copy of the model is
  made; the unmerge round trip is exact up to float rounding (the trainer keeps fp32 weights).
- With ``PolicyConfig.adapter_sync`` a LoRA model sends only its adapter, as ART reloads its
  adapter every step and TRL's async trainer does: peft saves it to a folder, vLLM's
  ``/v1/load_lora_adapter`` loads it under a new name, every later request names it (TRL's
  client sends ``client.model`` as the model), and the previous one is unloaded. No NCCL group
  is opened and the base weights never move; vLLM has no in-memory adapter API, so the server
  reads the folder from this machine's disk. vLLM keys its prefix cache by adapter, so no KV of
  the old adapter is reused.

TRL's client imports vLLM (for its NCCL helpers), so vLLM must be installed in the training
process too. Nothing from TRL is imported until this backend is loaded.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from skillrl.policies.base import (
    Conversation,
    Generation,
    SamplingConfig,
    ScoredContinuation,
    render_chat_ids,
)
from skillrl.policies.config import PolicyConfig
from skillrl.policies.model_cache import Progress
from skillrl.policies.weight_sync import is_peft, merged_weights
from skillrl_core.errors import BackendError, ConfigError, DependencyNotInstalled, ModelLoadError

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'skillrl[vllm]'  (needs a CUDA GPU; vLLM ships no CPU wheel)"
ADAPTER_HINT = (
    "start vLLM with `--enable-lora --max-lora-rank R` and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, "
    "or sync merged weights (without --adapter-sync)"
)
SCORE_CHUNK = 64
"""Sequences per ``get_sequence_logprobs`` request (several requests run concurrently)."""

T = TypeVar("T")


def import_vllm_client() -> type:
    """Return TRL's ``VLLMClient`` class or raise :class:`DependencyNotInstalled`."""
    try:
        from trl.generation.vllm_client import VLLMClient
        from trl.import_utils import is_vllm_available
    except ImportError as error:
        raise DependencyNotInstalled(
            f"the trl-vllm backend needs TRL's vLLM client: pip install 'trl>=1.16' ({error})"
        ) from error
    if not is_vllm_available():
        raise DependencyNotInstalled(
            "the trl-vllm backend needs vLLM in the training process too (TRL's client uses it "
            f"to join the weight-sync group): {INSTALL_HINT}"
        )
    return VLLMClient


class TRLVLLMServerPolicy:
    """A chat model served by ``trl vllm-serve``; ``sync_weights`` pushes a trainer's weights."""

    def __init__(
        self,
        client: Any,
        tokenizer: Any,
        name: str = "trl-vllm",
        *,
        base_url: str | None = None,
        adapter_sync: bool = False,
        timeout_s: float = 60.0,
    ) -> None:
        self.client = client
        self.tokenizer = tokenizer
        self.name = name
        self.base_url = (base_url or "").rstrip("/")
        self.adapter_sync = adapter_sync
        """Send only a LoRA model's adapter (``PolicyConfig.adapter_sync``)."""
        self.timeout_s = timeout_s
        self._communicator_ready = False
        self._adapters: Path | None = None
        """Where this policy saves the adapters the server loads (made on the first sync)."""
        self._served: str | None = None
        """The adapter the server generates with now (None: its base model)."""
        self._run = uuid.uuid4().hex[:8]
        """Part of every adapter name: a resumed run never reuses one the server still holds."""
        self.syncs = 0
        """Weight syncs done so far."""

    @classmethod
    def load(cls, config: PolicyConfig, progress: Progress | None = None) -> TRLVLLMServerPolicy:
        """Connect to ``config.base_url`` and load ``config.model``'s tokenizer locally."""
        client_class = import_vllm_client()
        from transformers import AutoTokenizer

        from skillrl.policies.transformers_loading import resolve_model_source

        source = resolve_model_source(config.model, progress, tokenizer_only=True)
        try:
            tokenizer = AutoTokenizer.from_pretrained(source)
        except (OSError, ValueError) as error:
            raise ModelLoadError(
                f"could not load the tokenizer of {config.model!r} from {source}: {error}"
            ) from error
        if progress:
            progress(f"connecting to the vLLM server at {config.base_url}")
        client = _call(
            f"connect to the vLLM server at {config.base_url} (start it with "
            f"`trl vllm-serve --model {source}`)",
            lambda: client_class(base_url=config.base_url, connection_timeout=config.timeout_s),
        )
        return cls(
            client,
            tokenizer,
            name=f"trl-vllm:{config.model}",
            base_url=config.base_url,
            adapter_sync=config.adapter_sync,
            timeout_s=config.timeout_s,
        )

    # -- prompts -----------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in the model's tokenizer."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def render(self, conversation: Conversation) -> list[int]:
        """Prompt token ids of a conversation (an assistant last message is continued)."""
        return render_chat_ids(self.tokenizer, conversation)

    # -- generation --------------------------------------------------------------------------
    def generate(
        self, conversations: list[Conversation], sampling: SamplingConfig
    ) -> list[Generation]:
        """One batched ``VLLMClient.generate`` call; stop strings applied here."""
        if not conversations:
            return []
        prompts = [self.render(c) for c in conversations]
        extra: dict[str, Any] = {}
        if sampling.stop:
            extra.update(stop=list(sampling.stop), include_stop_str_in_output=True)
        if sampling.seed is not None and not sampling.greedy:
            extra["seed"] = sampling.seed
        out = _call(
            "generate",
            lambda: self.client.generate(
                prompts=prompts,
                n=1,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=sampling.max_new_tokens,
                logprobs=0,
                generation_kwargs=extra,
            ),
        )
        rows = zip(
            prompts, out["completion_ids"], out["logprobs"], out["logprob_token_ids"], strict=True
        )
        return [
            self._finish(prompt, list(ids), _sampled_logprobs(ids, lps, lp_ids), sampling)
            for prompt, ids, lps, lp_ids in rows
        ]

    def _finish(
        self, prompt: list[int], tokens: list[int], lps: list[float], sampling: SamplingConfig
    ) -> Generation:
        """Cut a completion after its first stop string; decide why it ended."""
        cut = _stop_cut(self.tokenizer, tokens, sampling.stop)
        if cut is not None:
            tokens, reason = tokens[:cut], "stop"
        elif tokens and tokens[-1] in self._end_ids():
            reason = "stop"
        else:
            reason = "length" if len(tokens) >= sampling.max_new_tokens else "stop"
        return Generation(
            text=self.tokenizer.decode(tokens, skip_special_tokens=True),
            prompt_token_ids=list(prompt),
            completion_token_ids=tokens,
            logprobs=lps[: len(tokens)],
            finish_reason=reason,
        )

    def _end_ids(self) -> set[int]:
        ids = {self.tokenizer.eos_token_id, self.tokenizer.pad_token_id}
        return {i for i in ids if i is not None}

    # -- scoring -----------------------------------------------------------------------------
    def score_continuations(
        self, conversations: list[Conversation], continuations: list[list[str]]
    ) -> list[list[float]]:
        """Sum log-prob of every candidate continuation of every conversation."""
        detailed = self.score_continuations_detailed(conversations, continuations)
        return [[c.logprob for c in row] for row in detailed]

    def score_continuations_detailed(
        self, conversations: list[Conversation], continuations: list[list[str]]
    ) -> list[list[ScoredContinuation]]:
        """Score candidates with token ids and per-token log-probs (server prompt log-probs)."""
        if len(conversations) != len(continuations):
            raise ValueError(
                f"conversations ({len(conversations)}) and continuations "
                f"({len(continuations)}) must have the same length"
            )
        layout: list[tuple[list[int], str, list[int]]] = []
        for conversation, candidates in zip(conversations, continuations, strict=True):
            prompt = self.render(conversation)
            for text in candidates:
                layout.append((prompt, text, self.tokenizer.encode(text, add_special_tokens=False)))
        if not layout:
            return [[] for _ in continuations]
        out = _call(
            "score continuations",
            lambda: self.client.get_sequence_logprobs(
                sequences=[p + ids for p, _, ids in layout],
                prompt_lengths=[len(p) for p, _, _ in layout],
                top_logprobs=1,
                temperature=1.0,
                chunk_size=SCORE_CHUNK,
            ),
        )
        flat = []
        for (prompt, text, ids), actual in zip(layout, out["actual_logprobs"], strict=True):
            lps = [float(step[0]) for step in actual]
            if len(lps) != len(ids):
                raise BackendError(
                    f"the vLLM server scored {len(lps)} tokens of a {len(ids)}-token candidate"
                )
            flat.append(ScoredContinuation(text, float(sum(lps)), prompt, ids, lps))
        result, offset = [], 0
        for candidates in continuations:
            result.append(flat[offset : offset + len(candidates)])
            offset += len(candidates)
        return result

    # -- weights -----------------------------------------------------------------------------
    def sync_weights(self, model: Any) -> float:
        """Push ``model``'s weights (LoRA merged) to the server; returns the seconds it took.

        The NCCL communicator is opened on the first call, on the model's device (CUDA only).
        The prefix cache is reset afterwards so no KV computed with the old weights is reused.
        """
        started = time.perf_counter()
        if self.adapter_sync:
            self._load_adapter(model)
            self.syncs += 1
            seconds = time.perf_counter() - started
            logger.info("loaded adapter %s into the vLLM server in %.2fs", self._served, seconds)
            return seconds
        if not self._communicator_ready:
            device = next(model.parameters()).device
            _call(
                f"open the weight-sync group on {device} (the server must run `trl vllm-serve`)",
                lambda: self.client.init_communicator(device=device),
            )
            self._communicator_ready = True
        if is_peft(model):
            _call("push LoRA-merged weights", lambda: self._push_merged(model))
        else:
            _call("push weights", lambda: self.client.update_model_params(model))
        _call("reset the prefix cache", self.client.reset_prefix_cache)
        self.syncs += 1
        seconds = time.perf_counter() - started
        logger.info("synced weights to the vLLM server in %.2fs", seconds)
        return seconds

    def _push_merged(self, model: Any) -> None:
        with merged_weights(model) as params:
            metadata = [
                (name, str(p.dtype).removeprefix("torch."), list(p.shape)) for name, p in params
            ]
            self.client.update_named_params(metadata, iter(params))

    def _load_adapter(self, model: Any) -> None:
        """Save ``model``'s LoRA adapter, have the server load it, generate with it from now on."""
        if not is_peft(model):
            raise ConfigError(
                "adapter sync sends a LoRA adapter, but the trained model has none: train with "
                "--use-peft, or sync merged weights (without --adapter-sync)"
            )
        if self._adapters is None:
            self._adapters = Path(tempfile.mkdtemp(prefix="skillrl-adapters-"))
        name = f"skillrl-{self._run}-{self.syncs + 1}"
        folder = self._adapters / name
        model.save_pretrained(str(folder))  # peft: adapter_config.json + the adapter's tensors
        self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(folder)})
        previous, self._served = self._served, name
        self.client.model = name  # TRL's client names client.model in every request
        if previous is not None:
            self._post("/v1/unload_lora_adapter", {"lora_name": previous})
            shutil.rmtree(self._adapters / previous, ignore_errors=True)

    def _post(self, path: str, payload: dict[str, Any]) -> None:
        """POST ``payload`` as JSON to the server; a refusal is a :class:`BackendError`."""
        url = f"{self.base_url}{path}"
        request = urllib.request.Request(
            url,
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s):
                return
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:300]
            hint = f": {ADAPTER_HINT}" if error.code in (404, 405) else ""
            raise BackendError(
                f"trl-vllm: {url} answered {error.code} {detail.strip()}{hint}"
            ) from error
        except (urllib.error.URLError, OSError) as error:
            raise BackendError(f"trl-vllm: could not reach {url}: {error}") from error

    def close(self) -> None:
        """Leave the weight-sync group and drop the saved adapters (the server keeps running)."""
        if self._communicator_ready:
            _call("close the weight-sync group", self.client.close_communicator)
            self._communicator_ready = False
        if self._adapters is not None:
            shutil.rmtree(self._adapters, ignore_errors=True)
            self._adapters = None


def _stop_cut(tokenizer: Any, tokens: list[int], stop: list[str]) -> int | None:
    """Length of the shortest token prefix whose text contains a stop string (None: no stop)."""
    if not stop:
        return None
    full = tokenizer.decode(tokens, skip_special_tokens=True)
    if not any(s in full for s in stop):
        return None
    for end in range(1, len(tokens) + 1):
        text = tokenizer.decode(tokens[:end], skip_special_tokens=True)
        if any(s in text for s in stop):
            return end
    return None


def _sampled_logprobs(
    token_ids: list[int], logprobs: list[list[float | None]], logprob_ids: list[list[int]]
) -> list[float]:
    """Log-prob of each sampled token (TRL sorts each position by probability, sampled included)."""
    result = []
    for position, (token, values, ids) in enumerate(
        zip(token_ids, logprobs, logprob_ids, strict=True)
    ):
        value = values[ids.index(token)] if token in ids else None
        if value is None:
            raise BackendError(
                f"the vLLM server returned no log-prob for the sampled token at position "
                f"{position}; start it with `trl vllm-serve` (processed log-probs)"
            )
        result.append(float(value))
    return result


def _call(what: str, fn: Callable[[], T]) -> T:
    """Run a client call; turn its failures into :class:`BackendError` naming ``what``."""
    try:
        return fn()
    except DependencyNotInstalled:
        raise
    except ImportError as error:  # TRL's client re-checks its dependencies when built
        raise DependencyNotInstalled(f"the trl-vllm backend: {error}; {INSTALL_HINT}") from error
    # TRL's client raises plain Exception for HTTP failures, so nothing narrower catches them.
    except Exception as error:
        raise BackendError(f"trl-vllm: could not {what}: {error}") from error
