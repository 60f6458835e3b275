"""Where a bank's local files live, and whether this process may write them.

A bank in a workspace this process cannot write (a shared read-only copy, a mounted snapshot)
is still worth reading: it is opened read-only, so ``list``, ``show``, ``search`` and ``export``
work and a change fails with one clear line instead of SQLite's ``attempt to write a readonly
database`` deep inside a transaction.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import Engine

from memory.config import BankConfig
from memory.db import make_engine, read_only_sqlite_url, upgrade_schema
from skillrl_core.errors import BankError

SQLITE_FILE = "bank.sqlite"


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
    if config.read_only and database is not None and not database.exists():
        engine = make_engine("sqlite://", busy_timeout_s=config.busy_timeout_s)
        upgrade_schema(engine)  # in memory: the empty bank's tables
        return engine, True
    prepare_workspace(config)
    read_only = config.read_only or local_files_read_only(config)
    url = config.resolved_database_url
    if read_only and database is not None:
        url = read_only_sqlite_url(database)
    engine = make_engine(url, busy_timeout_s=config.busy_timeout_s, read_only=read_only)
    return engine, read_only
