"""The skill bank: skills and counterfactual notes in SQL, a ChromaDB index, per-turn retrieval.

``from memory import SkillBank, BankConfig, RetrievalConfig``; see ``docs/ARCHITECTURE.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory.config import BankConfig, RetrievalConfig
from memory.types import (
    AddResult,
    BankDiff,
    Entry,
    EntryDraft,
    PairedEvidence,
    RetrievalQuery,
    RetrievedEntry,
    RetrievedSkills,
    Revision,
    SnapshotInfo,
)

if TYPE_CHECKING:
    from memory.bank import SkillBank


def __getattr__(name: str) -> Any:
    """Import ``SkillBank`` on first use: it pulls in SQLAlchemy and Alembic.

    A rollout without skills reads only the types above, so it must run without the SQL stack
    (PEP 562 module ``__getattr__``).
    """
    if name == "SkillBank":
        from memory.bank import SkillBank

        return SkillBank
    raise AttributeError(f"module 'memory' has no attribute {name!r}")


__all__ = [
    "AddResult",
    "BankConfig",
    "BankDiff",
    "Entry",
    "EntryDraft",
    "PairedEvidence",
    "RetrievalConfig",
    "RetrievalQuery",
    "RetrievedEntry",
    "RetrievedSkills",
    "Revision",
    "SkillBank",
    "SnapshotInfo",
]
