"""A fine-tuned checkpoint as one LoRA adapter over its base model: the weights' change, factored.

The cold start fine-tunes a fresh LoRA adapter in every round and merges it, so its checkpoints
are plain models: base + the sum of every round's low-rank update. To ship the result as a small
adapter (peft's format, loadable with ``PeftModel.from_pretrained`` and by
:func:`skillrl.policies.transformers_loading.load_causal_lm`), each adapted linear layer's change
``delta = W_tuned - W_base`` is factored by a truncated SVD, ``delta ~ U_r S_r V_r^T``, into
``lora_B = U_r sqrt(S_r)`` and ``lora_A = sqrt(S_r) V_r^T`` with ``lora_alpha = r`` (scaling 1).
When ``r`` is at least the change's rank (the sum of the rounds' LoRA ranks), the factoring is
exact up to float rounding; below it, it keeps the largest directions, and
:attr:`AdapterExport.kept_energy` says how much of the change survived.

peft has no function for this: its LoRA tools go from an adapter to merged weights
(``merge_and_unload``), not back; the adapter is written with peft itself so that its format
is peft's own.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from skillrl_core.errors import ConfigError
from skillrl_core.files import make_readable
from trainers.cold_start.sft_config import LORA_MODULES

if TYPE_CHECKING:
    from skillrl.policies.model_settings import ModelSettings


@dataclass
class AdapterExport:
    """What :func:`export_adapter` wrote."""

    folder: Path
    rank: int
    modules: int
    """Linear modules whose weights changed (and got an adapter): several per decoder layer."""
    layers: int
    """Decoder layers holding those modules (what ``--lora-layers`` counts)."""
    kept_energy: float
    """Share of the change's squared Frobenius norm the rank-``rank`` factors keep (1.0: all)."""
    bytes: int
    """Size of ``adapter_model.safetensors``."""


def changed_layers(base: Any, tuned: Any, modules: tuple[str, ...] = LORA_MODULES) -> dict:
    """Return ``{module name: delta}`` for every linear layer of ``modules`` whose weight changed.

    Any other weight that differs (embeddings, norms) cannot be expressed by a LoRA adapter:
    ConfigError names it.
    """
    base_weights = dict(base.named_parameters())
    deltas: dict[str, torch.Tensor] = {}
    for name, weight in tuned.named_parameters():
        reference = base_weights.get(name)
        if reference is None or reference.shape != weight.shape:
            raise ConfigError(f"the tuned model's {name} has no counterpart in the base model")
        delta = weight.detach().float() - reference.detach().float()
        if not torch.any(delta):
            continue
        module, _, kind = name.rpartition(".")
        if kind != "weight" or module.rpartition(".")[2] not in modules:
            raise ConfigError(
                f"{name} changed in fine-tuning; a LoRA adapter covers only {', '.join(modules)}"
            )
        deltas[module] = delta
    return deltas


def export_adapter(
    base: Any,
    tuned: Any,
    folder: Path,
    *,
    rank: int,
    base_name: str,
    dtype: torch.dtype = torch.float16,
    on_module: Callable[[int, int], None] | None = None,
) -> AdapterExport:
    """Write ``tuned - base`` as a rank-``rank`` LoRA adapter into ``folder`` (peft's format).

    ``base_name`` goes into the adapter's ``base_model_name_or_path`` (``embedded`` for the
    embedded model). ``base`` is left unchanged; the factors are stored in ``dtype``.
    ``on_module(done, total)`` is called after each changed module is factorised (the SVDs are
    most of the time an export takes).
    """
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
    from safetensors.torch import save_file

    if rank < 1:
        raise ConfigError(f"rank ({rank}) must be >= 1")
    deltas = changed_layers(base, tuned)
    if not deltas:
        raise ConfigError("the tuned model equals the base model: there is no adapter to export")
    kinds = sorted({name.rpartition(".")[2] for name in deltas})
    layers = sorted({_layer_index(name) for name in deltas} - {None})
    config = LoraConfig(
        r=rank,
        lora_alpha=rank,
        lora_dropout=0.0,
        target_modules=kinds,
        layers_to_transform=layers or None,
        task_type="CAUSAL_LM",
        base_model_name_or_path=base_name,
    )
    peft_model = get_peft_model(copy.deepcopy(base), config)  # it wraps the model in place
    kept, total = 0.0, 0.0
    modules = dict(peft_model.base_model.model.named_modules())
    for done, (name, delta) in enumerate(deltas.items(), start=1):
        layer = modules.get(name)
        if layer is None or not hasattr(layer, "lora_A"):
            raise ConfigError(f"{name} changed but the adapter does not cover it")
        u, s, vh = torch.linalg.svd(delta, full_matrices=False)
        r = min(rank, s.numel())
        root = s[:r].sqrt()
        a = torch.zeros_like(layer.lora_A["default"].weight)
        b = torch.zeros_like(layer.lora_B["default"].weight)
        a[:r] = root[:, None] * vh[:r]
        b[:, :r] = u[:, :r] * root[None, :]
        layer.lora_A["default"].weight.data.copy_(a)
        layer.lora_B["default"].weight.data.copy_(b)
        kept += float((s[:r] ** 2).sum())
        total += float((s**2).sum())
        if on_module is not None:
            on_module(done, len(deltas))
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.to(dtype).contiguous() for k, v in get_peft_model_state_dict(peft_model).items()}
    save_file(state, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})
    config.base_model_name_or_path = base_name  # get_peft_model writes the base's own path here
    config.save_pretrained(str(folder))
    return AdapterExport(
        folder=folder,
        rank=rank,
        modules=len(deltas),
        layers=len(layers),
        kept_energy=kept / total if total else 1.0,
        bytes=(folder / "adapter_model.safetensors").stat().st_size,
    )


def _layer_index(name: str) -> int | None:
    parts = name.split(".")
    for before, part in zip(parts, parts[1:], strict=False):
        if before == "layers" and part.isdigit():
            return int(part)
    return None


def export_checkpoint(
    base_model: str,
    checkpoint: Path,
    folder: Path,
    *,
    rank: int,
    settings: ModelSettings | None = None,
    on_module: Callable[[int, int], None] | None = None,
) -> AdapterExport:
    """Load ``base_model`` (as ``--model`` names it) and ``checkpoint``; export their difference.

    ``checkpoint`` may be a whole model or a LoRA adapter folder (over any chain of adapters).

    ``on_module``: as :func:`export_adapter` takes it.
    ``settings`` (:class:`skillrl.policies.model_settings.ModelSettings`), when given, is saved
    beside the adapter, so that ``skillrl run --model <folder>`` plays it as it was trained.
    The folder is written whole or not at all (a temporary folder renamed into place).
    """
    import shutil
    import tempfile

    from transformers import AutoModelForCausalLM

    from skillrl.policies.model_settings import is_adapter
    from skillrl.policies.transformers_loading import load_causal_lm

    _, base = load_causal_lm(base_model, torch.float32)
    if is_adapter(checkpoint):
        # An adapter over its chain of bases (a LoRA run's checkpoint over the adapter it
        # started from), merged on load: the export is the whole change over base_model.
        _, tuned = load_causal_lm(str(checkpoint), torch.float32)
    else:
        tuned = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32)
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    try:
        result = export_adapter(
            base, tuned, tmp, rank=rank, base_name=base_model, on_module=on_module
        )
        if settings is not None:
            settings.save(tmp)
        make_readable(tmp, directory=True)
        for written in tmp.iterdir():
            make_readable(written)
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result.folder = folder
    return result
