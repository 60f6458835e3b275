"""Where the transformers policy's weights come from and what device and dtype they run in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from skillrl.policies.config import EMBEDDED_MODEL
from skillrl.policies.model_cache import (
    Progress,
    ensure_embedded_checkpoint,
    ensure_gguf_checkpoint,
)
from skillrl.policies.model_folders import check_model_path
from skillrl.policies.model_settings import ADAPTER_CONFIG, check_base_adapter, is_adapter
from skillrl_core.errors import ModelLoadError


def resolve_model_source(
    model: str, progress: Progress | None = None, tokenizer_only: bool = False
) -> str:
    """Turn ``model`` into something ``from_pretrained`` loads (a folder or a hub id).

    ``embedded`` and ``.gguf`` files resolve to their conversion in the per-user cache
    (``skillrl.policies.model_cache``); a folder that cannot be a model, or a path that does not
    exist, raises :class:`ModelLoadError` naming what it lacks (before anything loads). With
    ``tokenizer_only`` a folder needs only a tokenizer (the weights are a server's).
    """
    if model == EMBEDDED_MODEL:
        return str(ensure_embedded_checkpoint(progress))
    check_model_path(model, tokenizer_only=tokenizer_only)
    path = Path(model).expanduser()
    if path.is_file():  # a .gguf model: check_model_path refused any other file
        return str(ensure_gguf_checkpoint(path, progress))
    if path.is_dir():
        return str(path)
    return model  # a hub id (resolved from the local hub cache when offline)


MAX_ADAPTER_CHAIN = 4
"""Adapters over adapters a load follows (a LoRA run started from a shipped adapter saves an
adapter over it); a longer chain is refused as a loop."""


def load_causal_lm(
    model: str, dtype: torch.dtype, progress: Progress | None = None, *, depth: int = 0
) -> tuple[Any, Any]:
    """Load ``model``'s tokenizer and causal LM; a LoRA adapter folder is loaded onto its base.

    An adapter folder (peft's ``adapter_config.json``) names its base model
    (``base_model_name_or_path``: ``embedded``, a folder, another adapter folder or a hub id,
    resolved like ``--model``); the adapter is merged into the base weights after loading, so
    the policy runs (and trains) as a plain model at the base model's speed. Raises
    ``OSError`` / ``ValueError`` as ``from_pretrained`` does.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = resolve_model_source(model, progress)
    if not is_adapter(source):
        tokenizer = AutoTokenizer.from_pretrained(source)
        return tokenizer, AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    if depth >= MAX_ADAPTER_CHAIN:
        raise ModelLoadError(
            f"adapter {source} is over more than {MAX_ADAPTER_CHAIN} adapters in a row (a loop "
            "of base_model_name_or_path?); give a plain model folder or merge the chain"
        )
    from peft import PeftModel

    config_path = Path(source) / ADAPTER_CONFIG
    try:
        base_name = json.loads(config_path.read_text(encoding="utf-8"))["base_model_name_or_path"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ModelLoadError(
            f"adapter config {config_path} names no base model: {error}"
        ) from error
    check_base_adapter(source, str(base_name))
    tokenizer, base_model = load_causal_lm(str(base_name), dtype, progress, depth=depth + 1)
    if progress:
        progress(f"applying the LoRA adapter {source} to {base_name}")
    merged = PeftModel.from_pretrained(base_model, source).merge_and_unload()
    return tokenizer, merged


def pick_device(device: str) -> torch.device:
    """Return ``device`` as a torch device (``auto``: CUDA when available, else the CPU)."""
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
