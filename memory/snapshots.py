"""The snapshot store, ``bank.snapshots``: named copies of the entries (one per training cycle)."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memory.bulk import insert_entries
from memory.db import read_session
from memory.entries import content_of, iso
from memory.models import EntryRow, SnapshotRow
from memory.store import BankStore
from memory.types import BankDiff, Entry, EntryChange, SnapshotInfo
from skillrl_core.errors import BankError, InvalidEntryError, SkillNotFoundError

CURRENT = "current"
"""The name ``diff`` uses for the live bank."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _state(session: Session) -> list[dict[str, Any]]:
    rows = session.scalars(select(EntryRow).order_by(EntryRow.id))
    return [{"id": r.id, "revision": r.revision, **content_of(r)} for r in rows]


def _load(session: Session, name: str) -> list[dict[str, Any]]:
    if name == CURRENT:
        return _state(session)
    row = session.get(SnapshotRow, name)
    if row is None:
        raise SkillNotFoundError(f"no snapshot is named {name!r} (see `skillrl skills snapshots`)")
    return list(row.data)


class SnapshotStore:
    """Named snapshots of one bank's entries, sharing its engine and write transaction."""

    def __init__(self, store: BankStore) -> None:
        self._store = store

    def create(self, name: str) -> SnapshotInfo:
        """Save every entry's content, status and revision under ``name`` (names are unique)."""
        if not _NAME.match(name or "") or name == CURRENT:
            raise InvalidEntryError(
                f"snapshot name {name!r} must be 1-128 letters, digits, '.', '_' or '-' (not "
                f"{CURRENT!r})"
            )
        with self._store.transaction() as (session, _undo):
            if session.get(SnapshotRow, name) is not None:
                raise BankError(f"a snapshot named {name!r} already exists; choose another name")
            data = _state(session)
            row = SnapshotRow(name=name, entry_count=len(data), data=data)
            session.add(row)
            session.flush()
            return SnapshotInfo(name=name, created_at=iso(row.created_at), entries=len(data))

    def list(self) -> list[SnapshotInfo]:
        """Every snapshot, oldest first."""
        with read_session(self._store.engine) as session:
            rows = session.execute(
                select(SnapshotRow.name, SnapshotRow.created_at, SnapshotRow.entry_count).order_by(
                    SnapshotRow.created_at, SnapshotRow.name
                )
            ).all()
        return [SnapshotInfo(name=n, created_at=iso(c), entries=k) for n, c, k in rows]

    def entries(self, name: str) -> list[Entry]:
        """Return the entries snapshot ``name`` holds: content, status, id and revision.

        Snapshots keep no usage statistics, so these entries carry none.
        """
        with read_session(self._store.engine) as session:
            data = _load(session, name)
        return [Entry(**record) for record in data]

    def restore_into(self, name: str, target: BankStore) -> int:
        """Insert snapshot ``name``'s entries into the empty bank ``target``; return how many.

        One transaction; ids, status and revisions are kept, and the active entries indexed.

        How a run plays its evaluation goals with the bank as it was at its start: the live bank
        keeps evolving, the copy does not.
        """
        with read_session(target.engine) as session:
            held = session.scalar(select(EntryRow.id).limit(1))
        if held is not None:
            raise BankError(
                f"snapshot {name!r} restores only into an empty bank; the target holds entries"
            )
        entries = self.entries(name)
        insert_entries(target, entries, author=f"snapshot:{name}")
        return len(entries)

    def diff(self, a: str, b: str | None = None) -> BankDiff:
        """Entries added, removed and changed from snapshot ``a`` to ``b`` (None: the live bank)."""
        b = b or CURRENT
        with read_session(self._store.engine) as session:
            before = {e["id"]: e for e in _load(session, a)}
            after = {e["id"]: e for e in _load(session, b)}
        result = BankDiff(a=a, b=b)
        result.added = [after[i] for i in sorted(set(after) - set(before))]
        result.removed = [before[i] for i in sorted(set(before) - set(after))]
        for entry_id in sorted(set(before) & set(after)):
            old, new = before[entry_id], after[entry_id]
            fields = {
                k: (old.get(k), new.get(k))
                for k in sorted(set(old) | set(new))
                if k != "revision" and old.get(k) != new.get(k)
            }
            if fields:
                result.changed.append(EntryChange(entry_id, new.get("title", ""), fields))
        return result
