"""A version number of the vector index, kept in SQL, bumped by every index-changing commit.

Processes sharing an embedded index compare it with the version they last saw to know when to
reload their in-memory copy (see ``VectorIndex.reload``).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from memory.models import MetaRow

INDEX_VERSION_KEY = "index_version"


def index_version(session: Session) -> str:
    """Return the committed index version ("0" for a new bank)."""
    row = session.get(MetaRow, INDEX_VERSION_KEY)
    return row.value if row is not None else "0"


def bump_index_version(session: Session) -> str:
    """Increase the index version in the current transaction; returns the new value."""
    row = session.get(MetaRow, INDEX_VERSION_KEY)
    if row is None:
        row = MetaRow(key=INDEX_VERSION_KEY, value="0")
        session.add(row)
    row.value = str(int(row.value) + 1)
    session.flush()
    return row.value
