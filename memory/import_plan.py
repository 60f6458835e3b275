"""What ``skills import`` would do to a bank, written nowhere: each record added, merged or refused.

``skillrl skills import --dry-run`` opens the bank read-only (:attr:`BankConfig.read_only`) and
shows this plan. It runs the import's own checks (:func:`memory.jsonl_format.check_jsonl`,
:func:`memory.skillrl_format.check_skillrl_file`) on every record, not only up to the first bad
one, and the bank's own merge decisions (:meth:`SkillBank.plan_many`), so what it says is what
the import then does: while any record is refused, the import refuses the whole file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from memory.jsonl_format import CheckedRecord, check_jsonl
from memory.skillrl_format import check_skillrl_file
from memory.types import EntryDraft

if TYPE_CHECKING:
    from memory.bank import SkillBank

Outcome = Literal["add", "merge", "refuse"]


@dataclass
class PlannedRecord:
    """What the import would do with one record of the file."""

    where: str
    """Where the record is: ``file:line`` (JSONL) or its JSON path (SkillRL)."""
    title: str
    """The record's title (empty when it could not be read)."""
    outcome: Outcome
    """``add`` (a new entry), ``merge`` (into a near-duplicate) or ``refuse``."""
    into: str = ""
    """merge: the id of the bank entry it merges into (empty when it merges into a record)."""
    into_record: str = ""
    """merge: the ``where`` of the earlier, new record of this file it merges into."""
    similarity: float | None = None
    """merge: cosine similarity to what it merges into."""
    reason: str = ""
    """refuse: why."""


@dataclass
class ImportPlan:
    """Every record of an import file and what would become of it, in file order."""

    records: list[PlannedRecord] = field(default_factory=list)

    def count(self, outcome: Outcome) -> int:
        """How many records would have ``outcome``."""
        return sum(r.outcome == outcome for r in self.records)

    @property
    def refused(self) -> bool:
        """Whether any record is refused (the import would then write nothing at all)."""
        return self.count("refuse") > 0


def plan_jsonl(bank: SkillBank, path: Path) -> ImportPlan:
    """Plan a JSONL import: every valid record is added as it is (ids kept), never merged."""
    plan = ImportPlan()
    for record in check_jsonl(bank, path):
        if record.item is None:
            plan.records.append(_refusal(record))
        else:
            plan.records.append(PlannedRecord(record.where, record.item.title, "add"))
    return plan


def plan_skillrl(
    bank: SkillBank, path: Path, *, env: str, category_map: Mapping[str, str] | None = None
) -> ImportPlan:
    """Plan a SkillRL import: each valid record is added or merges into a near-duplicate."""
    records = check_skillrl_file(path, env=env, category_map=category_map)
    drafts = [r.item for r in records if isinstance(r.item, EntryDraft)]
    wheres = [r.where for r in records if isinstance(r.item, EntryDraft)]
    placements = iter(bank.plan_many(drafts))  # one per draft, in order
    plan = ImportPlan()
    for record in records:
        if not isinstance(record.item, EntryDraft):
            plan.records.append(_refusal(record))
            continue
        placement = next(placements)
        planned = PlannedRecord(record.where, record.item.title, "add")
        if placement.merged:
            planned.outcome, planned.similarity = "merge", placement.similarity
            if placement.entry_id is not None:
                planned.into = placement.entry_id
            else:  # an earlier record of this file, itself new
                planned.into_record = wheres[int(placement.draft or 0)]
        plan.records.append(planned)
    return plan


def _refusal(record: CheckedRecord) -> PlannedRecord:
    reason = record.error.removeprefix(f"{record.where}: ")
    return PlannedRecord(record.where, record.title, "refuse", reason=reason)
