"""Where skillrl keeps its state: the workspace folder.

Layout (all created on demand):

- ``bank.sqlite``: the skill bank's SQL source of truth (unless a database URL is given);
- ``chroma/``: the embedded ChromaDB vector index;
- ``models/``: converted model checkpoints (the embedded GGUF, converted once);
- ``runs/``: training runs (checkpoints, metrics, state for ``--resume``).
"""

from __future__ import annotations

import os
from pathlib import Path

WORKSPACE_ENV_VAR = "SKILLRL_WORKSPACE"
DEFAULT_WORKSPACE = ".skillrl"


def resolve_workspace(path: str | os.PathLike[str] | None = None) -> Path:
    """Return the workspace folder: ``path``, else ``$SKILLRL_WORKSPACE``, else ``./.skillrl``."""
    chosen = path or os.environ.get(WORKSPACE_ENV_VAR) or DEFAULT_WORKSPACE
    return Path(chosen).expanduser().resolve()
