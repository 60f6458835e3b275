"""Skill-bank fixtures: banks on every configured store (the embedder is tests/conftest.py's).

``store`` runs a test on SQLite + embedded Chroma always, and also on PostgreSQL and on a Chroma
server when ``SKILLRL_TEST_POSTGRES_URL`` / ``SKILLRL_TEST_CHROMA_URL`` are set (``.ci/run`` and
``scripts/test.sh`` start both; locally those runs skip).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from bank_samples import GENERAL, MISTAKE, PRICE_NOTE, SIZE_NOTE

from memory import BankConfig, SkillBank

POSTGRES_ENV = "SKILLRL_TEST_POSTGRES_URL"
CHROMA_ENV = "SKILLRL_TEST_CHROMA_URL"


def _postgres_database(admin_url: str) -> Iterator[str]:
    """A fresh, empty database on the test server, dropped afterwards."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"skillrl_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(
    params=[
        "local",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("chroma_server", marks=pytest.mark.chroma_server),
    ]
)
def bank_config(request, tmp_path: Path) -> Iterator[BankConfig]:
    """A config for an empty bank on one store: local files, PostgreSQL, or a Chroma server."""
    kind = request.param
    workspace = tmp_path / "bank"
    collection = f"t{uuid.uuid4().hex}"
    if kind == "local":
        yield BankConfig(workspace=workspace, collection=collection)
    elif kind == "postgres":
        url = os.environ.get(POSTGRES_ENV)
        if not url:
            pytest.skip(f"{POSTGRES_ENV} is not set (scripts/test.sh starts a server)")
        for database_url in _postgres_database(url):
            yield BankConfig(workspace=workspace, database_url=database_url, collection=collection)
    else:
        url = os.environ.get(CHROMA_ENV)
        if not url:
            pytest.skip(f"{CHROMA_ENV} is not set (scripts/test.sh starts a server)")
        yield BankConfig(workspace=workspace, chroma_url=url, collection=collection)


@pytest.fixture
def bank(bank_config: BankConfig, embedder) -> Iterator[SkillBank]:
    """An open, empty bank on the store ``bank_config`` names."""
    with SkillBank.open(bank_config, embedder=embedder) as opened:
        yield opened


@pytest.fixture
def local_bank(tmp_path: Path, embedder) -> Iterator[SkillBank]:
    """An open, empty bank on SQLite + embedded Chroma only."""
    config = BankConfig(workspace=tmp_path / "local")
    with SkillBank.open(config, embedder=embedder) as opened:
        yield opened


@pytest.fixture
def samples() -> SimpleNamespace:
    """The sample drafts above: ``size``, ``price``, ``general``, ``mistake``."""
    return SimpleNamespace(size=SIZE_NOTE, price=PRICE_NOTE, general=GENERAL, mistake=MISTAKE)
