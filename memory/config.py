"""Configuration of the skill bank (storage, embedder, merging) and of retrieval."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from skillrl_core.errors import ConfigError
from skillrl_core.validation import check_finite_fields

DATABASE_URL_ENV_VAR = "SKILLRL_DATABASE_URL"
CHROMA_URL_ENV_VAR = "SKILLRL_CHROMA_URL"
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
MAX_K = 100
"""Most entries of one kind a query may ask for (each one is prompt text)."""


@dataclass
class BankConfig:
    """Where the bank lives and how it embeds and merges entries."""

    workspace: Path = Path(".skillrl")
    """Workspace folder: holds ``bank.sqlite`` and ``chroma/`` unless URLs are given."""
    database_url: str | None = None
    """Any SQLAlchemy URL (``postgresql+psycopg://...``); None: SQLite in the workspace."""
    chroma_url: str | None = None
    """A Chroma server (``http://host:port``); None: an embedded index in ``<workspace>/chroma``."""
    embedder: str = DEFAULT_EMBEDDER
    """sentence-transformers model: a folder, or an id; the default is the packaged MiniLM."""
    merge_threshold: float = 0.9
    """A new entry whose cosine similarity to an active one of the same kind (and env+category)
    exceeds this merges into it instead of being added."""
    collection: str = "skillrl_entries"
    """Name of the Chroma collection (lets several banks share one Chroma server)."""
    on_mismatch: Literal["repair", "error", "ignore"] = "repair"
    """What opening does when SQL and the index disagree: rebuild the differing index records
    (with a warning), raise ``BankInconsistentError``, or skip the check."""
    busy_timeout_s: float = 30.0
    """How long an SQLite writer waits for another writer's lock before failing."""
    read_only: bool = False
    """Open for reading only, even where the files may be written (``skills import --dry-run``):
    nothing is written, a change raises ``BankError``, and a bank that does not exist yet reads
    as empty (and is not created)."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        self.workspace = Path(self.workspace).expanduser()
        if not 0.0 < self.merge_threshold <= 1.0:
            raise ConfigError(f"merge_threshold ({self.merge_threshold}) must be in (0, 1]")
        if self.on_mismatch not in ("repair", "error", "ignore"):
            raise ConfigError(
                f"on_mismatch ({self.on_mismatch!r}) must be 'repair', 'error' or 'ignore'"
            )
        if not self.embedder:
            raise ConfigError("embedder must name a sentence-transformers model path or id")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{2,62}", self.collection):
            raise ConfigError(
                f"collection ({self.collection!r}) must be 3-63 letters, digits, '.', '_' or '-'"
            )
        if self.busy_timeout_s < 0:
            raise ConfigError(f"busy_timeout_s ({self.busy_timeout_s}) must be >= 0")
        if self.chroma_url is not None and not self.chroma_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"chroma_url ({self.chroma_url!r}) must start with http:// or https://"
            )

    @property
    def resolved_database_url(self) -> str:
        """The SQLAlchemy URL actually used."""
        return self.database_url or f"sqlite:///{self.workspace / 'bank.sqlite'}"

    @property
    def chroma_path(self) -> Path:
        """Folder of the embedded Chroma index (used when ``chroma_url`` is None)."""
        return self.workspace / "chroma"


@dataclass
class RetrievalConfig:
    """How many entries of each kind a turn gets, and how similar they must be."""

    k_general: int = 2
    """General skills per query: always the k most similar, whatever ``min_similarity``."""
    k_task: int = 3
    """Task-specific skills (same env and category as the query) per query."""
    k_mistakes: int = 2
    """Counterfactual notes (same env, or env-agnostic) per query."""
    min_similarity: float = 0.25
    """Task skills, notes and cases less cosine-similar to the query than this are left out
    (general skills are exempt: they are always included)."""
    k_cases: int = 1
    """Cases (what solved a similar request in a training episode; same env) per query, by the
    similarity of the request alone."""
    case_fit_margin: float = 0.05
    """Cases whose request is within this much cosine similarity of the nearest case's request
    compete on fit: of them, one known to lack an option value the query wants gives way to the
    nearest one that is not (0: only cases tied in similarity, one request's cases, compete).
    0.05 was chosen on eval-split goals; see docs/results.md, "Cases within reach"."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        for name in ("k_general", "k_task", "k_mistakes", "k_cases"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_K:
                raise ConfigError(f"{name} ({value!r}) must be an integer from 0 to {MAX_K}")
        if not -1.0 <= self.min_similarity <= 1.0:
            raise ConfigError(f"min_similarity ({self.min_similarity}) must be in [-1, 1]")
        if not 0.0 <= self.case_fit_margin <= 2.0:
            raise ConfigError(f"case_fit_margin ({self.case_fit_margin}) must be in [0, 2]")
