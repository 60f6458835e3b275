"""Where a bank's local files live, and whether this process may write them.

A bank in a workspace this process cannot write (a shared read-only copy, a mounted snapshot)
is still worth reading: it is opened read-only, so ``list``, ``show``, ``search`` and ``export``
work and a change fails with one clear line instead of SQLite's ``attempt to write a readonly
database`` deep inside a transaction.
"""

from __future__ import annotations

import os
import sqlite3
import struct
from pathlib import Path

from sqlalchemy import Engine

from memory.config import BankConfig
from memory.db import (
    MIGRATIONS,
    make_engine,
    read_only_sqlite_uri,
    read_only_sqlite_url,
    upgrade_schema,
)
from skillrl_core.errors import BankError

SQLITE_FILE = "bank.sqlite"
SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""
BANK_TABLE = "entries"
"""A table every skillrl bank has, whatever its schema revision."""
VERSION_TABLE = "alembic_version"
"""Where a bank records its schema revision (every bank was created by its migrations)."""
_LEAVE_IT = "nothing was changed; move it away (or restore a copy) to use this workspace"


def _database_pages(header: bytes) -> int | None:
    """Pages the database header says the file holds (None where the header does not say)."""
    (page_size,) = struct.unpack(">H", header[16:18])
    page_size = 65536 if page_size == 1 else page_size
    (pages,) = struct.unpack(">I", header[28:32])
    # The in-header size is valid only where "version-valid-for" equals the change counter.
    if header[92:96] != header[24:28] or pages == 0:
        return None
    return pages * page_size


def check_bank_file(path: Path) -> None:
    """Refuse, untouched, a file at ``path`` that is not a readable skillrl bank.

    Reads the header and the list of tables only (read-only, no lock taken, nothing written):
    an empty file, another kind of file, a truncated database and another program's SQLite
    database each fail with one :class:`BankError` line naming the file.
    """
    if not path.exists():
        return
    if path.is_dir():
        raise BankError(f"the skill bank {path} is a folder, not a database file; {_LEAVE_IT}")
    try:
        size = path.stat().st_size
        with path.open("rb") as file:
            header = file.read(100)
    except OSError as e:
        raise BankError(f"cannot read the skill bank {path}: {e.strerror or e}") from e
    if size == 0:
        raise BankError(f"the skill bank {path} is an empty file (0 bytes); {_LEAVE_IT}")
    if len(header) < 100 or not header.startswith(SQLITE_HEADER):
        raise BankError(
            f"the skill bank {path} is not an SQLite database (damaged, or another kind of "
            f"file); {_LEAVE_IT}"
        )
    expected = _database_pages(header)
    if expected is not None and size < expected:
        raise BankError(
            f"the skill bank {path} is truncated ({size} of {expected} bytes); {_LEAVE_IT}"
        )
    try:
        connection = sqlite3.connect(read_only_sqlite_uri(path), uri=True)
        try:
            tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
            revisions = (
                {str(row[0]) for row in connection.execute(f"SELECT * FROM {VERSION_TABLE}")}
                if VERSION_TABLE in tables
                else set()
            )
        finally:
            connection.close()
    except sqlite3.Error as e:
        raise BankError(f"the skill bank {path} cannot be read ({e}); {_LEAVE_IT}") from e
    missing = [t for t in (BANK_TABLE, VERSION_TABLE) if t not in tables]
    if missing:
        raise BankError(
            f"{path} is an SQLite database but not a skillrl skill bank (it has no "
            f"{missing[0]!r} table); {_LEAVE_IT}"
        )
    known = known_revisions()
    if not revisions & known:
        raise BankError(
            f"{path} is an SQLite database but not a skillrl skill bank this version knows (its "
            f"schema revision {', '.join(sorted(revisions)) or 'none'} is none of "
            f"{', '.join(sorted(known))}: another program's, or a newer skillrl's); {_LEAVE_IT}"
        )


def known_revisions() -> set[str]:
    """Return the schema revisions this version's migrations define (``0001``, ...)."""
    return {p.name.split("_", 1)[0] for p in (MIGRATIONS / "versions").glob("[0-9]*_*.py")}


def _create_bank_file(path: Path, busy_timeout_s: float) -> None:
    """Build a new, empty bank beside ``path`` and move it into place whole.

    Another process creating the same bank at the same time wins or loses the move; either way
    ``path`` ends up a complete bank, never a half-created one.
    """
    partial = path.with_name(f".{path.name}.{os.getpid()}.new")
    engine = make_engine(f"sqlite:///{partial}", busy_timeout_s=busy_timeout_s)
    try:
        upgrade_schema(engine)
    finally:
        engine.dispose()
    try:
        os.link(partial, path)  # unlike a rename, never replaces a bank created meanwhile
    except FileExistsError:
        pass
    except OSError as e:
        raise BankError(f"cannot create the skill bank {path}: {e.strerror or e}") from e
    finally:
        for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
            leftover.unlink(missing_ok=True)


def check_chroma_folder(config: BankConfig) -> None:
    """Refuse an embedded index path that is not a folder (nothing is changed)."""
    path = config.chroma_path
    if config.chroma_url is None and path.exists() and not path.is_dir():
        raise BankError(
            f"the skill bank's index {config.chroma_path} is a file, not a folder; {_LEAVE_IT}"
        )


def sqlite_path(config: BankConfig) -> Path | None:
    """Return the SQLite file of a bank that keeps its database in the workspace (else None)."""
    return config.workspace / SQLITE_FILE if config.database_url is None else None


def prepare_workspace(config: BankConfig) -> None:
    """Create the workspace folder when the bank keeps files there; one-line error if it cannot."""
    if config.database_url is not None and config.chroma_url is not None:
        return
    if config.workspace.is_dir():
        return
    try:
        config.workspace.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        reason = e.strerror or type(e).__name__
        if isinstance(e, (FileExistsError, NotADirectoryError)):
            reason = "a file is in the way (the path, or one of its folders, is not a folder)"
        raise BankError(f"cannot create the workspace folder {config.workspace}: {reason}") from e


def _check_workspace_path(workspace: Path) -> None:
    """Refuse a workspace that could never be a folder (it, or a folder above it, is a file)."""
    for path in (workspace, *workspace.parents):
        if path.exists():
            if not path.is_dir():
                raise BankError(
                    f"cannot create the workspace folder {workspace}: a file is in the way "
                    "(the path, or one of its folders, is not a folder)"
                )
            return


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


def local_files_read_only(config: BankConfig) -> bool:
    """Whether the bank's existing local files (SQLite file, its folder, the index) are read-only.

    Only an existing bank can be read-only: a new one is created, and a workspace that cannot
    even be created fails in :func:`prepare_workspace`.
    """
    database = sqlite_path(config)
    if database is None or not database.exists():
        return False
    paths = [config.workspace, database]
    if config.chroma_url is None and config.chroma_path.exists():
        paths.append(config.chroma_path)
    return not all(_writable(p) for p in paths)


def open_engine(config: BankConfig) -> tuple[Engine, bool]:
    """Create the workspace if needed and the bank's engine; also says whether it is read-only.

    With ``config.read_only`` nothing is created: a workspace without a bank yet gets an empty
    bank in memory, which is read like any other.
    """
    database = sqlite_path(config)
    if database is not None:
        check_bank_file(database)
    check_chroma_folder(config)
    if config.read_only and database is not None and not database.exists():
        _check_workspace_path(config.workspace)
        engine = make_engine("sqlite://", busy_timeout_s=config.busy_timeout_s)
        upgrade_schema(engine)  # in memory: the empty bank's tables
        return engine, True
    prepare_workspace(config)
    if database is not None and not database.exists():
        _create_bank_file(database, config.busy_timeout_s)
    read_only = config.read_only or local_files_read_only(config)
    url = config.resolved_database_url
    if read_only and database is not None:
        url = read_only_sqlite_url(database)
    engine = make_engine(url, busy_timeout_s=config.busy_timeout_s, read_only=read_only)
    return engine, read_only
