"""The skill bank: skills and counterfactual notes in SQL, a ChromaDB index, per-turn retrieval.

``from memory import SkillBank, BankConfig, RetrievalConfig``; see ``docs/ARCHITECTURE.md``.
"""

from __future__ import annotations

from memory.bank import SkillBank
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
