"""Where skillrl keeps its state: the workspace folder.

Layout (all created on demand):

- ``bank.sqlite``: the skill bank's SQL source of truth (unless a database URL is given);
- ``chroma/``: the embedded ChromaDB vector index;
- ``runs/``: training runs (checkpoints, metrics, state for ``--resume``).

Converted models (the embedded GGUF, converted once) are not kept here but in the per-user
cache that every workspace shares (``skillrl.policies.model_cache.cache_dir``).
"""

from __future__ import annotations

import os
from pathlib import Path

WORKSPACE_ENV_VAR = "SKILLRL_WORKSPACE"
DEFAULT_WORKSPACE = ".skillrl"
WORKSPACE_CONTENTS = "skill bank, training runs and their checkpoints"
"""What a workspace holds, as help text says it (converted models are in the per-user cache)."""


def resolve_workspace(path: str | os.PathLike[str] | None = None) -> Path:
    """Return the workspace folder: ``path``, else ``$SKILLRL_WORKSPACE``, else ``./.skillrl``."""
    chosen = path or os.environ.get(WORKSPACE_ENV_VAR) or DEFAULT_WORKSPACE
    return Path(chosen).expanduser().resolve()
