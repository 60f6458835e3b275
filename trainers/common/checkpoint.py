"""Files a training run keeps: model checkpoints, trainer state, JSON state; all written atomically.

- :func:`save_checkpoint`: a ``from_pretrained``-loadable folder (safetensors weights, config,
  tokenizer), or for LoRA the adapter alone over the model the run started from (peft's
  layout); either with the settings it was trained under (``skillrl.json``) when given. The
  folder is written beside its target and renamed into place.
- :func:`save_trainer_state` / :func:`load_trainer_state`: the trainable parameters and the AdamW
  state, as safetensors (tensors) plus JSON metadata, so ``--resume`` continues the same
  optimisation. Nothing is ever unpickled.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from skillrl_core.errors import CheckpointError
from skillrl_core.files import make_readable

if TYPE_CHECKING:
    from skillrl.policies.model_settings import ModelSettings

PARAMS_FILE = "trainable.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
META_FILE = "meta.json"


def replace_dir(tmp: Path, final: Path) -> None:
    """Move a finished folder ``tmp`` to ``final``, replacing an older ``final`` if any."""
    old = final.with_name(f".{final.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    if old.exists():
        shutil.rmtree(old)


def remove_stale_temps(target: Path) -> list[Path]:
    """Delete what a killed atomic write of ``target`` left beside it; returns what was removed.

    A process killed with SIGKILL (or the machine going down) never reaches the ``except``
    that removes its temp file or folder, and a model checkpoint's is hundreds of MB. Only the
    names this module's writers use for ``target`` (``.<name>.*.tmp`` and ``.<name>.old``) are
    touched, and a run folder has one writer, so nothing another process is writing goes.
    """
    folder = target.parent
    if not folder.is_dir():
        return []
    stale = [*folder.glob(f".{target.name}.*.tmp"), *folder.glob(f".{target.name}.old")]
    for path in stale:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return stale


def save_checkpoint(
    model: Any,
    tokenizer: Any,
    path: Path,
    settings: ModelSettings | None = None,
    adapter_over: str | None = None,
) -> Path:
    """Save a ``from_pretrained``-loadable model (+ tokenizer) at ``path``, atomically.

    ``settings``, when given, are saved in the folder too (``skillrl.json``), in the same
    rename: the settings the model was trained under, which ``run`` and ``eval`` replay.
    ``adapter_over``, for a peft model: save only its LoRA adapter (peft's
    ``adapter_config.json`` and ``adapter_model.safetensors``, megabytes instead of the whole
    model), naming ``adapter_over`` as its base (the model the run started from, as
    ``--model`` names it), which :func:`~skillrl.policies.transformers_loading.load_causal_lm`
    loads it onto.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    make_readable(tmp, directory=True)
    try:
        if adapter_over is not None and hasattr(model, "peft_config"):
            _save_adapter(model, tmp, adapter_over)
        else:
            _merged(model).save_pretrained(tmp, safe_serialization=True)
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp)
        if settings is not None:
            settings.save(tmp)
        replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _save_adapter(model: Any, folder: Path, base: str) -> None:
    """Save a peft model's adapter alone into ``folder``, with ``base`` as its base model."""
    from skillrl.policies.model_settings import ADAPTER_CONFIG, record_base_adapter

    model.save_pretrained(folder, safe_serialization=True)
    config_path = folder / ADAPTER_CONFIG
    config = json.loads(config_path.read_text(encoding="utf-8"))
    # peft records the path the base weights were read from; for a run started from an adapter
    # (merged on load) that is the adapter's own base, which would drop the adapter's change.
    config["base_model_name_or_path"] = base
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    record_base_adapter(folder, base)  # a base adapter replaced later is then noticed on load


def _merged(model: Any) -> Any:
    if hasattr(model, "merge_and_unload"):  # a peft model: merge a copy, keep training the adapter
        return copy.deepcopy(model).merge_and_unload()
    return model


def save_trainer_state(
    model: Any,
    optimizer: torch.optim.Optimizer,
    folder: Path,
    meta: dict[str, Any] | None = None,
) -> None:
    """Save trainable parameters, optimizer state and ``meta`` (JSON) into ``folder`` atomically."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(folder)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    make_readable(tmp, directory=True)
    try:
        params = {n: p.detach().contiguous().cpu() for n, p in _trainable(model)}
        save_file(params, str(tmp / PARAMS_FILE))
        tensors, layout = _flatten_optimizer(optimizer.state_dict())
        save_file(tensors, str(tmp / OPTIMIZER_FILE), metadata={"meta": json.dumps(layout)})
        (tmp / META_FILE).write_text(json.dumps(meta or {}, indent=2), encoding="utf-8")
        replace_dir(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_trainer_state(model: Any, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Restore what :func:`save_trainer_state` wrote; raise CheckpointError if it does not fit."""
    try:
        params = load_file(str(folder / PARAMS_FILE))
        tensors = load_file(str(folder / OPTIMIZER_FILE))
        from safetensors import safe_open

        with safe_open(str(folder / OPTIMIZER_FILE), framework="pt") as handle:
            meta = json.loads(handle.metadata()["meta"])
    except (OSError, SafetensorError, KeyError, json.JSONDecodeError) as error:
        raise CheckpointError(
            f"trainer state in {folder} is missing or corrupt: {error}"
        ) from error
    _copy_into_trainable(model, params, f"trainer state in {folder}")
    optimizer.load_state_dict(_unflatten_optimizer(tensors, meta))


def save_trainable_weights(model: Any, path: Path) -> None:
    """Save the model's trainable parameters alone (no optimizer state) to ``path`` atomically.

    What a run keeps of its best cycle so it can play that cycle's weights again at the end
    (a LoRA run: the adapter's few megabytes; a full run: the whole model's parameters).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)  # safetensors writes the file by name
    tmp = Path(name)
    try:
        save_file({n: p.detach().contiguous().cpu() for n, p in _trainable(model)}, str(tmp))
        make_readable(tmp)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load_trainable_weights(model: Any, path: Path) -> None:
    """Copy what :func:`save_trainable_weights` wrote into ``model``'s trainable parameters.

    CheckpointError, naming the file, when it is missing, damaged or holds other parameters.
    """
    try:
        params = load_file(str(path))
    except (OSError, SafetensorError) as error:
        raise CheckpointError(f"weights file {path} is missing or corrupt: {error}") from error
    _copy_into_trainable(model, params, f"weights file {path}")


def _copy_into_trainable(model: Any, params: dict[str, torch.Tensor], source: str) -> None:
    """Copy ``params`` into the model's trainable parameters; CheckpointError if they differ."""
    expected = dict(_trainable(model))
    if set(params) != set(expected):
        missing = sorted(set(expected) - set(params))[:3]
        extra = sorted(set(params) - set(expected))[:3]
        raise CheckpointError(
            f"{source} does not fit this model (missing {missing}, unexpected {extra}); was it "
            "saved with the other of LoRA / full fine-tuning?"
        )
    with torch.no_grad():
        for name, value in params.items():
            expected[name].copy_(value.to(expected[name].device, expected[name].dtype))


def read_trainer_meta(folder: Path) -> dict[str, Any] | None:
    """Return the ``meta`` saved with a trainer state (None when there is no complete state)."""
    try:
        return json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as error:
        raise CheckpointError(f"trainer state in {folder} is corrupt: {error}") from error


def _trainable(model: Any) -> list[tuple[str, torch.nn.Parameter]]:
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def _flatten_optimizer(state: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, entry in state["state"].items():
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{index}.{key}"] = value.detach().contiguous().cpu()
            else:
                scalars.setdefault(str(index), {})[key] = value
    if not tensors:  # safetensors needs at least one tensor: mark "no state yet"
        tensors["__empty__"] = torch.zeros(1)
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        if name == "__empty__":
            continue
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = value
    for index, entries in meta["scalars"].items():
        state.setdefault(int(index), {}).update(entries)
    return {"state": state, "param_groups": meta["param_groups"]}
