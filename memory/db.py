"""The SQL engine: SQLite in the workspace by default (WAL, busy timeout) or any SQLAlchemy URL.

Writers are serialised so that read-modify-write changes (edits, merges) never lose an update
across processes: SQLite write transactions start with ``BEGIN IMMEDIATE`` (the database write
lock is taken up front, so a second writer waits ``busy_timeout`` instead of failing on lock
upgrade), PostgreSQL write transactions take one transaction-scoped advisory lock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session

from skillrl.errors import BankError, ConfigError, DependencyNotInstalled

logger = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_WRITE = "skillrl_write"
# Arbitrary constant shared by every skillrl process: the key of the PostgreSQL advisory lock.
_PG_LOCK_KEY = 0x5C111B4A


def make_engine(url: str, *, busy_timeout_s: float = 30.0) -> Engine:
    """Create the engine for ``url``; SQLite gets WAL, a busy timeout and explicit BEGINs."""
    try:
        if url.startswith("sqlite"):
            engine = create_engine(url, connect_args={"timeout": busy_timeout_s})
            _configure_sqlite(engine, busy_timeout_s)
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


def _configure_sqlite(engine: Engine, busy_timeout_s: float) -> None:
    # pysqlite's own implicit transactions would defer the write lock; take BEGIN over
    # (SQLAlchemy's documented recipe) so write transactions can say IMMEDIATE.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        write = connection.get_execution_options().get(_WRITE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """Open a session whose transaction holds the bank's write lock; commit on success."""
    with Session(engine.execution_options(**{_WRITE: True}), expire_on_commit=False) as session:
        with session.begin():
            if engine.dialect.name == "postgresql":
                session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
            yield session


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """Open a read-only session (no write lock)."""
    with Session(engine, expire_on_commit=False) as session:
        yield session


def upgrade_schema(engine: Engine) -> None:
    """Bring the schema to the newest migration (a no-op when it is already there)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(config).get_current_head()
    try:
        with engine.connect() as connection:
            current = MigrationContext.configure(connection).get_current_revision()
        if current == head:
            return
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
