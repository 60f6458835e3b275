"""The SQL engine: SQLite in the workspace by default (WAL, busy timeout) or any SQLAlchemy URL.

Writers are serialised so that read-modify-write changes (edits, merges) never lose an update
across processes: SQLite write transactions start with ``BEGIN IMMEDIATE`` (the database write
lock is taken up front, so a second writer waits ``busy_timeout`` instead of failing on lock
upgrade), PostgreSQL write transactions take one transaction-scoped advisory lock. A writer that
still finds the lock taken after ``busy_timeout`` tries again a few times, then gives up with a
:class:`BankError` (one line, never a raw ``database is locked``).

A bank whose SQLite file this process may not write is opened read-only (``mode=ro``): it serves
every read, and a write fails with a :class:`BankError` that says the bank is read-only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session

from skillrl_core.errors import BankError, ConfigError, DependencyNotInstalled

if TYPE_CHECKING:
    from sqlalchemy import Connection
    from sqlalchemy.engine.interfaces import DBAPIConnection
    from sqlalchemy.orm import SessionTransaction
    from sqlalchemy.pool import ConnectionPoolEntry

logger = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_WRITE = "skillrl_write"
LOCK_ATTEMPTS = 3
"""Times a writer waits ``busy_timeout`` for the write lock before giving up."""
# Arbitrary constant shared by every skillrl process: the key of the PostgreSQL advisory lock.
_PG_LOCK_KEY = 0x5C111B4A


def read_only_sqlite_uri(path: Path) -> str:
    """SQLite URI (for ``sqlite3.connect(..., uri=True)``) that never writes ``path`` or its folder.

    ``mode=ro`` still needs the ``-shm`` file of a WAL database, which a read-only folder cannot
    get; when no ``-wal`` file is there, every change is in the main file, so ``immutable=1``
    (no locks, no shared memory) reads it as it is.
    """
    wal = Path(f"{path}-wal")
    flags = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    return f"file:{quote(str(path))}?{flags}"


def read_only_sqlite_url(path: Path) -> str:
    """SQLAlchemy URL of :func:`read_only_sqlite_uri`."""
    return f"sqlite:///{read_only_sqlite_uri(path)}&uri=true"


def make_engine(url: str, *, busy_timeout_s: float = 30.0, read_only: bool = False) -> Engine:
    """Create the engine for ``url``; SQLite gets WAL, a busy timeout and explicit BEGINs."""
    try:
        if url.startswith("sqlite"):
            engine = create_engine(url, connect_args={"timeout": busy_timeout_s})
            _configure_sqlite(engine, busy_timeout_s, read_only=read_only)
        else:
            engine = create_engine(url, pool_pre_ping=True)
    except NoSuchModuleError as e:
        raise ConfigError(f"database_url {url!r}: unknown database dialect ({e})") from e
    except ArgumentError as e:
        raise ConfigError(f"database_url {url!r} is not a valid SQLAlchemy URL ({e})") from e
    except ModuleNotFoundError as e:
        raise DependencyNotInstalled(
            f"the driver for {url.split(':', 1)[0]} is missing ({e.name}); for PostgreSQL run "
            "`pip install 'psycopg[binary]'` and use a postgresql+psycopg:// URL"
        ) from e
    return engine


def _configure_sqlite(engine: Engine, busy_timeout_s: float, *, read_only: bool) -> None:
    # pysqlite's own implicit transactions would defer the write lock; take BEGIN over
    # (SQLAlchemy's documented recipe) so write transactions can say IMMEDIATE.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not read_only:  # the journal mode is stored in the file: setting it writes
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        write = connection.get_execution_options().get(_WRITE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _busy(error: OperationalError) -> bool:
    text_ = str(error.orig).lower()
    return "database is locked" in text_ or "database is busy" in text_


def _read_only(error: OperationalError) -> bool:
    return "readonly database" in str(error.orig).lower()


def store_error(engine: Engine, error: OperationalError) -> BankError:
    """Return a one-line :class:`BankError` for a database error the user has to act on."""
    if _read_only(error):
        return BankError(
            f"the skill bank {engine.url.database} is read-only (no write permission); "
            "`list`, `show`, `search` and `export` still work, changes need a writable workspace"
        )
    return BankError(f"the skill-bank database {engine.url!r} failed: {error.orig}")


def damaged_bank(engine: Engine, error: DatabaseError) -> BankError:
    """Return a one-line :class:`BankError` for a database SQLite cannot read (damaged)."""
    if isinstance(error, OperationalError) and (_busy(error) or _read_only(error)):
        return store_error(engine, error)
    return BankError(
        f"the skill bank {engine.url.database} is damaged ({error.orig}); nothing was changed: "
        "restore it from a copy, or move it away to start a new bank"
    )


def _begin_write(engine: Engine) -> tuple[Session, SessionTransaction]:
    """Open a session holding the write lock, waiting up to ``LOCK_ATTEMPTS`` busy timeouts."""
    bind = engine.execution_options(**{_WRITE: True})
    for attempt in range(1, LOCK_ATTEMPTS + 1):
        session = Session(bind, expire_on_commit=False)
        try:
            transaction = session.begin()
            session.connection()  # SQLite: BEGIN IMMEDIATE takes the write lock here
            if engine.dialect.name == "postgresql":
                session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
            return session, transaction
        except OperationalError as e:
            session.close()
            if not _busy(e):
                raise store_error(engine, e) from e
            if attempt == LOCK_ATTEMPTS:
                raise BankError(
                    f"the skill bank is busy: another process kept the write lock of "
                    f"{engine.url.database} through {attempt} waits of the busy timeout; "
                    "try again when it has finished"
                ) from e
            # Info, not a warning: the user sees one line only if waiting finally fails.
            logger.info("the skill bank is busy (another process is writing); still waiting")
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """Open a session whose transaction holds the bank's write lock; commit on success."""
    session, transaction = _begin_write(engine)
    try:
        with session, transaction:
            yield session
    except OperationalError as e:
        if _read_only(e):
            raise store_error(engine, e) from e
        raise


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """Open a read-only session (no write lock)."""
    with Session(engine, expire_on_commit=False) as session:
        yield session


def upgrade_schema(engine: Engine, *, read_only: bool = False) -> None:
    """Bring the schema to the newest migration (a no-op when it is already there)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(config).get_current_head()
    try:
        with engine.connect() as connection:
            current = MigrationContext.configure(connection).get_current_revision()
        if current == head:
            return
        if read_only:
            raise BankError(
                f"the skill bank {engine.url.database} was opened read-only and its schema "
                f"({current}) needs migrating to {head}; run a command that changes the bank "
                "(e.g. `skillrl skills reindex`) from a writable workspace first"
            )
        with engine.execution_options(**{_WRITE: True}).begin() as connection:
            if engine.dialect.name == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY}
                )
            # Another process may have migrated while we waited for the lock.
            if MigrationContext.configure(connection).get_current_revision() == head:
                return
            logger.info("migrating the skill bank schema from %s to %s", current, head)
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
    except OperationalError as e:
        raise BankError(f"cannot open the skill-bank database {engine.url!r}: {e.orig}") from e
