"""Entry revisions: every change of content or status keeps the version it replaced."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from memory.entries import content_of, iso
from memory.models import EntryRow, RevisionRow
from memory.types import Revision
from skillrl_core.errors import SkillNotFoundError


def add_revision(session: Session, row: EntryRow, *, author: str, reason: str) -> None:
    """Record ``row``'s current content as its revision ``row.revision``."""
    session.add(
        RevisionRow(
            entry_id=row.id,
            revision=row.revision,
            data=content_of(row),
            author=author,
            reason=reason,
        )
    )


def _revision(row: RevisionRow) -> Revision:
    return Revision(
        entry_id=row.entry_id,
        revision=row.revision,
        author=row.author,
        reason=row.reason,
        created_at=iso(row.created_at),
        data=dict(row.data),
    )


def history(session: Session, entry_id: str) -> list[Revision]:
    """Every revision of ``entry_id``, oldest first."""
    rows = session.scalars(
        select(RevisionRow).where(RevisionRow.entry_id == entry_id).order_by(RevisionRow.revision)
    ).all()
    return [_revision(r) for r in rows]


MAX_REVISION = 2**31 - 1
"""Largest revision number a bank can store (PostgreSQL's ``integer``)."""


def revision_data(session: Session, entry_id: str, revision: int) -> dict:
    """Return the content and status an entry had at ``revision``."""
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        raise SkillNotFoundError(
            f"revision ({revision!r}) must be a revision number >= 1 (see `skillrl skills history`)"
        )
    if revision > MAX_REVISION:  # the database's integer column cannot even hold it
        raise SkillNotFoundError(f"entry {entry_id!r} has no revision {revision}")
    row = session.scalar(
        select(RevisionRow).where(
            RevisionRow.entry_id == entry_id, RevisionRow.revision == revision
        )
    )
    if row is None:
        raise SkillNotFoundError(f"entry {entry_id!r} has no revision {revision}")
    return dict(row.data)
