"""Policy backends behind one contract (:class:`ChatPolicy`), chosen by :class:`PolicyConfig`.

Backends are imported only when loaded, so ``import skillrl.policies`` does not import torch.
"""

from __future__ import annotations

from skillrl.policies.base import (
    ChatPolicy,
    Conversation,
    Generation,
    SamplingConfig,
    ScoredContinuation,
)
from skillrl.policies.config import BACKENDS, EMBEDDED_MODEL, PolicyConfig
from skillrl.policies.model_cache import Progress

__all__ = [
    "BACKENDS",
    "EMBEDDED_MODEL",
    "ChatPolicy",
    "Conversation",
    "Generation",
    "PolicyConfig",
    "SamplingConfig",
    "ScoredContinuation",
    "load_policy",
]


def load_policy(config: PolicyConfig, progress: Progress | None = None) -> ChatPolicy:
    """Build the policy ``config`` describes; ``progress`` receives one-line status messages."""
    if config.backend == "transformers":
        from skillrl.policies.transformers_backend import TransformersPolicy

        return TransformersPolicy.load(config, progress)
    if config.backend == "openai":
        from skillrl.policies.openai_backend import OpenAIPolicy

        return OpenAIPolicy.from_config(config)
    if config.backend == "trl-vllm":
        from skillrl.policies.trl_vllm_backend import TRLVLLMServerPolicy

        return TRLVLLMServerPolicy.load(config, progress)
    from skillrl.policies.vllm_backend import VLLMPolicy

    return VLLMPolicy.load(config, progress)
