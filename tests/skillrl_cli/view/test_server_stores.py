"""The view over the team setup: the bank on PostgreSQL with a Chroma server (``.ci/run`` starts
both on loopback; without them these tests skip, as the bank's own server tests do)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from memory import BankConfig, EntryDraft, SkillBank
from memory.embedding import shared_embedder
from skillrl_cli.view.app import ViewConfig, build_app
from skillrl_cli.view.security import ViewSecurity

pytestmark = [pytest.mark.postgres, pytest.mark.chroma_server]

POSTGRES_ENV = "SKILLRL_TEST_POSTGRES_URL"
CHROMA_ENV = "SKILLRL_TEST_CHROMA_URL"


@pytest.fixture
def server_bank(tmp_path) -> Iterator[SkillBank]:
    """An empty bank whose SQL is a fresh PostgreSQL database and whose index a Chroma server."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin_url, chroma_url = os.environ.get(POSTGRES_ENV), os.environ.get(CHROMA_ENV)
    if not admin_url or not chroma_url:
        pytest.skip(f"{POSTGRES_ENV} and {CHROMA_ENV} are not set (scripts/test.sh starts both)")
    name = f"skillrl_view_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    database_url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    config = BankConfig(workspace=tmp_path / "ws", database_url=database_url,
                        chroma_url=chroma_url, collection=f"v{uuid.uuid4().hex}")  # fmt: skip
    try:
        with SkillBank.open(config, embedder=shared_embedder()) as bank:
            yield bank
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_the_view_lists_shows_and_retrieves_from_a_server_bank(server_bank, tmp_path):
    entry = server_bank.add(
        EntryDraft(
            kind="task",
            title="Pick the <b>shoe size</b> asked for",
            principle="Click the size in the instruction before buying.",
            env="webshop",
            category="footwear",
        )  # fmt: skip
    ).entry
    client = TestClient(build_app(server_bank, ViewConfig(runs_dir=tmp_path / "runs"),
                                  ViewSecurity()), base_url="http://127.0.0.1")  # fmt: skip
    listed = client.get("/skills")
    assert listed.status_code == 200
    assert "Pick the &lt;b&gt;shoe size&lt;/b&gt; asked for" in listed.text
    shown = client.get(f"/skills/{entry.id}")
    assert shown.status_code == 200 and "Click the size in the instruction" in shown.text
    assert client.get("/skills/nope-nope").status_code == 404
