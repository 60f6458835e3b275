"""Whether a ``--model`` path can be loaded, checked from its files in milliseconds.

``from_pretrained`` on a folder that is not a model fails late (after torch and transformers
have imported, 10-15 s) and obliquely: a ``config.json`` without weights or tokenizer reports
sentencepiece and tiktoken as missing. :func:`check_model_path` reads only file names and
safetensors headers, so a command can say what a folder lacks, or which file is corrupt,
before anything loads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skillrl.policies.config import EMBEDDED_MODEL
from skillrl.policies.model_settings import ADAPTER_CONFIG
from skillrl_core.errors import ModelLoadError

MODEL_CONFIG = "config.json"
"""transformers' file naming a checkpoint's architecture."""
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
"""peft's weight files of a LoRA adapter (one of them)."""
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
"""A checkpoint's weight files (a single file or shards)."""
SHARD_INDEX = "model.safetensors.index.json"
"""The shard list of a sharded safetensors checkpoint."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")
"""Any one of these holds a tokenizer's vocabulary (fast, sentencepiece, BPE, WordPiece)."""
WHAT_A_MODEL_FOLDER_HOLDS = (
    "a checkpoint folder holds config.json, model weights (*.safetensors) and a tokenizer "
    "(tokenizer.json); a LoRA adapter folder holds adapter_config.json and "
    "adapter_model.safetensors"
)


def looks_like_path(model: str) -> bool:
    """Whether ``model`` names a file or folder rather than a hub id (``owner/name``)."""
    return model.startswith((".", "/", "~")) or model.count("/") > 1


def check_model_path(model: str, tokenizer_only: bool = False) -> None:
    """Raise :class:`ModelLoadError` unless ``model`` may load: what it lacks, in one line.

    ``embedded``, a ``.gguf`` file and a hub id pass (they are resolved when loading); a folder
    must hold a checkpoint or a LoRA adapter (:func:`check_model_folder`), or only a tokenizer
    with ``tokenizer_only`` (a backend whose weights live on a server); a path that does not
    exist is refused.
    """
    if model == EMBEDDED_MODEL:
        return
    path = Path(model).expanduser()
    if path.is_file():
        if path.suffix == ".gguf":
            _check_gguf_header(path)
            return
        raise ModelLoadError(f"model path {path} is a file but not a .gguf model")
    if path.is_dir():
        if tokenizer_only:
            _check_tokenizer(path)
        else:
            check_model_folder(path)
        return
    if looks_like_path(model):
        raise ModelLoadError(f"model folder {model!r} does not exist")


def check_model_folder(folder: Path) -> None:
    """Raise :class:`ModelLoadError` naming what ``folder`` lacks or which file is corrupt."""
    entries = list(folder.iterdir())
    names = {p.name for p in entries if p.is_file()}
    if not entries:
        raise ModelLoadError(f"model folder {folder} is empty ({WHAT_A_MODEL_FOLDER_HOLDS})")
    if ADAPTER_CONFIG in names:
        _check_adapter(folder, entries)
        return
    if MODEL_CONFIG not in names:
        raise ModelLoadError(
            f"{folder} is not a checkpoint folder: it has no {MODEL_CONFIG} "
            f"({WHAT_A_MODEL_FOLDER_HOLDS})"
        )
    weights = sorted({p for pattern in WEIGHT_PATTERNS for p in folder.glob(pattern)})
    if not weights:
        raise ModelLoadError(
            f"model folder {folder} has {MODEL_CONFIG} but no weights "
            f"({' or '.join(WEIGHT_PATTERNS)})"
        )
    if SHARD_INDEX in names:
        _check_shards(folder)
    _check_safetensors(weights)
    if not names & set(TOKENIZER_FILES):
        raise ModelLoadError(
            f"model folder {folder} has no tokenizer (one of {', '.join(TOKENIZER_FILES)}); "
            "save it beside the weights (tokenizer.save_pretrained)"
        )


LORA = "LORA"
"""The one ``peft_type`` the loader takes: it merges a LoRA adapter into its base weights."""


def _check_adapter(folder: Path, entries: list[Path]) -> None:
    """Refuse a LoRA adapter folder whose files cannot make the model it claims, in one line.

    ``adapter_config.json`` must be peft's object for a LoRA adapter naming its base model (an
    existing folder when it names one); the weights a readable safetensors file holding LoRA
    tensors whose rank is the config's ``r`` (peft's ``size mismatch`` otherwise, after the base
    model loaded).
    """
    weight_entries = [p for p in entries if p.name in ADAPTER_WEIGHTS]
    weights = [p for p in weight_entries if p.is_file()]
    if not weights and weight_entries:
        raise ModelLoadError(
            f"adapter weights {weight_entries[0]} cannot be read: a broken symbolic link, or "
            "a loop of links"
        )
    if not weights:
        raise ModelLoadError(
            f"LoRA adapter folder {folder} has {ADAPTER_CONFIG} but no weights "
            f"({' or '.join(ADAPTER_WEIGHTS)})"
        )
    config = _adapter_config(folder)
    _check_safetensors(weights)
    for file in weights:
        if file.suffix == ".safetensors":
            _check_lora_tensors(file, config)
    _check_base_model(folder, config)


def _adapter_config(folder: Path) -> dict[str, Any]:
    path = folder / ADAPTER_CONFIG
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"adapter config {path} cannot be read: {error}") from error
    if not isinstance(config, dict):
        raise ModelLoadError(
            f"adapter config {path} must hold a JSON object (peft's LoraConfig), not a "
            f"{type(config).__name__}"
        )
    if config.get("peft_type") != LORA:
        raise ModelLoadError(
            f"adapter config {path} has peft_type {config.get('peft_type')!r}: only LoRA "
            f"adapters ({LORA!r}) can be loaded"
        )
    rank = config.get("r")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ModelLoadError(f"adapter config {path} has r ({rank!r}): it must be an integer >= 1")
    if not isinstance(config.get("base_model_name_or_path"), str):
        raise ModelLoadError(
            f"adapter config {path} names no base model (base_model_name_or_path: "
            f"{config.get('base_model_name_or_path')!r}); it must be 'embedded', a folder or a "
            "hub id"
        )
    return config


def _check_lora_tensors(file: Path, config: dict[str, Any]) -> None:
    """Refuse weights without LoRA tensors, or whose rank is not the config's ``r``."""
    from safetensors import safe_open

    rank, per_module = config["r"], config.get("rank_pattern") or {}
    with safe_open(str(file), framework="numpy") as weights:
        lora = [k for k in weights.keys() if ".lora_A." in k or ".lora_B." in k]
        if not lora:
            raise ModelLoadError(
                f"adapter weights {file} hold no LoRA tensors (lora_A / lora_B): the adapter "
                "would leave the base model untrained"
            )
        if per_module:
            return  # ranks set per module (rank_pattern): peft matches them by name
        for key in lora:
            shape = weights.get_slice(key).get_shape()
            found = shape[0] if ".lora_A." in key else shape[-1]
            if len(shape) < 2 or found != rank:
                raise ModelLoadError(
                    f"adapter weights {file} do not match {ADAPTER_CONFIG}: {key} has shape "
                    f"{list(shape)} (rank {found}) but r is {rank}; the two files come from "
                    "different adapters"
                )


def _check_base_model(folder: Path, config: dict[str, Any]) -> None:
    """Refuse a base model folder the adapter names that does not exist or is no model."""
    base = config["base_model_name_or_path"]
    where = folder / ADAPTER_CONFIG
    if base == EMBEDDED_MODEL or not (looks_like_path(base) or Path(base).expanduser().exists()):
        return  # the embedded model, or a hub id (resolved when loading)
    path = Path(base).expanduser()
    if not path.is_dir():
        raise ModelLoadError(
            f"the base model {base!r} that {where} names (base_model_name_or_path) is not a "
            "model folder; fix that entry, or give the base model's folder there"
        )
    if path.resolve() == folder.resolve():
        raise ModelLoadError(f"{where} names its own folder as its base model")
    # A base that is itself an adapter (a run's LoRA checkpoint over the shipped adapter) is
    # checked as one in turn: adapters over adapters load in a chain.
    try:
        check_model_folder(path)
    except ModelLoadError as error:
        raise ModelLoadError(f"the base model that {where} names: {error}") from error


GGUF_MAGIC = b"GGUF"
GGUF_HEADER_BYTES = 24
"""Magic, version, tensor count and metadata count: the least a GGUF file holds."""


def _check_gguf_header(path: Path) -> None:
    """Refuse a ``.gguf`` file that does not even start like one (empty, cut short, another file).

    Cheap (24 bytes): a file truncated further in fails when it is read, in one line too.
    """
    try:
        with path.open("rb") as file:
            header = file.read(GGUF_HEADER_BYTES)
    except OSError as error:
        raise ModelLoadError(f"cannot read model file {path}: {error.strerror or error}") from error
    if len(header) < GGUF_HEADER_BYTES or not header.startswith(GGUF_MAGIC):
        raise ModelLoadError(
            f"model file {path} is not a GGUF model (it does not start with a GGUF header: "
            "truncated, empty or another kind of file)"
        )


def _check_tokenizer(folder: Path) -> None:
    names = {p.name for p in folder.iterdir() if p.is_file()}
    if not names & set(TOKENIZER_FILES) and ADAPTER_CONFIG not in names:
        raise ModelLoadError(
            f"model folder {folder} has no tokenizer (one of {', '.join(TOKENIZER_FILES)})"
        )


def _check_shards(folder: Path) -> None:
    index = folder / SHARD_INDEX
    try:
        shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ModelLoadError(f"shard index {index} is corrupt: {error}") from error
    missing = sorted(s for s in shards if not (folder / str(s)).is_file())
    if missing:
        raise ModelLoadError(f"model folder {folder} lacks the shard(s) {', '.join(missing)}")


def _check_safetensors(files: list[Path]) -> None:
    """Read each safetensors file's header (cheap: the tensors are not read)."""
    from safetensors import SafetensorError, safe_open

    for file in files:
        if file.suffix != ".safetensors":
            continue  # a pickle is not opened to check it: it would run its code
        try:
            with safe_open(str(file), framework="numpy"):
                pass
        except (SafetensorError, OSError) as error:
            raise ModelLoadError(f"weight file {file} is corrupt: {error}") from error
