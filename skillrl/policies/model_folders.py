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
        weights = [folder / n for n in ADAPTER_WEIGHTS if n in names]
        if not weights:
            raise ModelLoadError(
                f"LoRA adapter folder {folder} has {ADAPTER_CONFIG} but no weights "
                f"({' or '.join(ADAPTER_WEIGHTS)})"
            )
        _check_safetensors(weights)
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
