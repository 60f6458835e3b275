"""Where an in-process policy's time and tokens went (the benchmarks' turn profile)."""

from __future__ import annotations

from dataclasses import dataclass


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
    """Real (unpadded) prompt tokens the model computed (tokens taken from the prefix KV cache
    are not counted here but in ``reused_tokens``)."""
    reused_tokens: int = 0
    """Prompt tokens whose keys and values came from the prefix KV cache (``kv_reuse``)."""
    candidate_tokens: int = 0
    """Candidate tokens fed to the model."""
    generated_tokens: int = 0
    """Generated tokens of the rows actually decoded (copies of a greedy row not counted)."""
    prefix_shareable_tokens: int = 0
    """Prompt tokens a batch-wide shared prefix would have saved: per call, the longest prefix
    common to all encoded prompts times (encoded prompts - 1). Measures whether computing that
    prefix once would pay (the prefix KV cache, ``skillrl.policies.kv_reuse``, computes it once
    and every later call finds it)."""

    def reset(self) -> None:
        """Zero every field."""
        for key, value in vars(PolicyStats()).items():
            setattr(self, key, value)

    def to_dict(self) -> dict[str, float]:
        """Plain numbers."""
        return {k: float(v) for k, v in vars(self).items()}
