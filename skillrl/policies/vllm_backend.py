"""In-process vLLM policy for GPU machines (optional extra: ``pip install 'skillrl[vllm]'``).

vLLM has no CPU wheel and pins its own torch, so it is imported only here, when this backend is
loaded. Generation uses ``LLM.generate`` on prompts rendered with the model's chat template (so a
trailing assistant message can be continued); scoring uses ``prompt_logprobs`` over prompt plus
candidate, reading the candidate's tokens' log-probs.
"""

from __future__ import annotations

import logging
from typing import Any

from skillrl.policies.base import (
    Conversation,
    Generation,
    SamplingConfig,
    ScoredContinuation,
    render_chat_ids,
)
from skillrl.policies.config import PolicyConfig
from skillrl.policies.model_cache import Progress
from skillrl_core.errors import DependencyNotInstalled, ModelLoadError

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'skillrl[vllm]'  (needs a CUDA GPU; vLLM ships no CPU wheel)"


def import_vllm() -> Any:
    """Import vLLM or raise :class:`DependencyNotInstalled` with the install command."""
    try:
        import vllm
    except ImportError as error:
        raise DependencyNotInstalled(f"the vllm backend needs vLLM: {INSTALL_HINT}") from error
    return vllm


class VLLMPolicy:
    """A chat model served in-process by vLLM."""

    def __init__(self, llm: Any, name: str = "vllm") -> None:
        self.llm = llm
        self.tokenizer = llm.get_tokenizer()
        self.name = name

    @classmethod
    def load(cls, config: PolicyConfig, progress: Progress | None = None) -> VLLMPolicy:
        """Load ``config.model`` (``embedded`` is converted to a checkpoint first)."""
        vllm = import_vllm()
        from skillrl.policies.transformers_loading import resolve_model_source

        source = resolve_model_source(config.model, progress)
        if progress:
            progress(f"starting vLLM with {config.model}")
        dtype = "auto" if config.dtype == "auto" else config.dtype
        try:
            llm = vllm.LLM(
                model=source, dtype=dtype, gpu_memory_utilization=config.gpu_memory_utilization
            )
        except (OSError, ValueError, RuntimeError) as error:
            raise ModelLoadError(f"vLLM could not load {config.model!r}: {error}") from error
        return cls(llm, name=f"vllm:{config.model}")

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in the model's tokenizer."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def _render(self, conversation: Conversation) -> list[int]:
        return render_chat_ids(self.tokenizer, conversation)

    def generate(
        self, conversations: list[Conversation], sampling: SamplingConfig
    ) -> list[Generation]:
        """One batched ``LLM.generate`` call; log-probs of the sampled tokens included."""
        vllm = import_vllm()
        prompts = [self._render(c) for c in conversations]
        params = vllm.SamplingParams(
            max_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=sampling.seed,
            stop=list(sampling.stop) or None,
            include_stop_str_in_output=True,
            logprobs=0,
        )
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], params)
        generations = []
        for prompt, output in zip(prompts, outputs, strict=True):
            completion = output.outputs[0]
            token_ids = list(completion.token_ids)
            logprobs = [
                float(step[t].logprob)
                for step, t in zip(completion.logprobs, token_ids, strict=True)
            ]
            generations.append(
                Generation(
                    text=completion.text,
                    prompt_token_ids=prompt,
                    completion_token_ids=token_ids,
                    logprobs=logprobs,
                    finish_reason="length" if completion.finish_reason == "length" else "stop",
                )
            )
        return generations

    def score_continuations(
        self, conversations: list[Conversation], continuations: list[list[str]]
    ) -> list[list[float]]:
        """Sum log-prob of every candidate (one batched prompt-log-prob pass)."""
        detailed = self.score_continuations_detailed(conversations, continuations)
        return [[c.logprob for c in row] for row in detailed]

    def score_continuations_detailed(
        self, conversations: list[Conversation], continuations: list[list[str]]
    ) -> list[list[ScoredContinuation]]:
        """Score candidates with their token ids and per-token log-probs."""
        vllm = import_vllm()
        requests, layout = [], []
        for conversation, candidates in zip(conversations, continuations, strict=True):
            prompt = self._render(conversation)
            for text in candidates:
                ids = self.tokenizer.encode(text, add_special_tokens=False)
                requests.append({"prompt_token_ids": prompt + ids})
                layout.append((prompt, text, ids))
        params = vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0)
        outputs = self.llm.generate(requests, params)
        flat = []
        for (prompt, text, ids), output in zip(layout, outputs, strict=True):
            steps = output.prompt_logprobs[len(prompt) :]
            lps = [float(step[t].logprob) for step, t in zip(steps, ids, strict=True)]
            flat.append(ScoredContinuation(text, float(sum(lps)), prompt, ids, lps))
        result, offset = [], 0
        for candidates in continuations:
            result.append(flat[offset : offset + len(candidates)])
            offset += len(candidates)
        return result
