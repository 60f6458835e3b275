"""Skill-bank fixtures: one real MiniLM embedder per session, banks on every configured store.

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

from memory import BankConfig, EntryDraft, SkillBank
from memory.embedding import SentenceTransformerEmbedder

POSTGRES_ENV = "SKILLRL_TEST_POSTGRES_URL"
CHROMA_ENV = "SKILLRL_TEST_CHROMA_URL"


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    """The real packaged all-MiniLM-L6-v2, loaded once."""
    return SentenceTransformerEmbedder()


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


SIZE_NOTE = EntryDraft(
    kind="task",
    title="Pick the shoe size the customer asked for",
    principle="Before buying footwear, click the size option that matches the size in the "
    "instruction (e.g. size 9); a wrong size fails the purchase.",
    when_to_apply="On a footwear product page with size options.",
    env="webshop",
    category="footwear",
)
PRICE_NOTE = EntryDraft(
    kind="task",
    title="Stay under the price limit",
    principle="Compare each item's price with the budget in the instruction and skip items "
    "that cost more than the stated maximum.",
    when_to_apply="On search results and product pages.",
    env="webshop",
    category="footwear",
)
GENERAL = EntryDraft(
    kind="general",
    title="Re-read the instruction before buying",
    principle="Before clicking buy now, check every attribute and option the instruction asks "
    "for against the product page.",
)
MISTAKE = EntryDraft(
    kind="mistake",
    title="Bought without choosing a colour",
    principle="Select every required option (colour, size) before clicking buy now.",
    failure_point="The product page with colour options.",
    flawed_action="click[buy now]",
    correction="click[black], then click[buy now]",
    env="webshop",
    category="footwear",
)


@pytest.fixture
def samples() -> SimpleNamespace:
    """The sample drafts above: ``size``, ``price``, ``general``, ``mistake``."""
    return SimpleNamespace(size=SIZE_NOTE, price=PRICE_NOTE, general=GENERAL, mistake=MISTAKE)
