"""Fixtures of the distiller tests: a real SkillBank (SQLite + embedded Chroma + MiniLM)."""

from __future__ import annotations

import pytest

from memory import BankConfig, SkillBank


@pytest.fixture(scope="session")
def embedder():
    """The packaged all-MiniLM-L6-v2, loaded once for every test that needs a bank."""
    from memory.embedding import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


@pytest.fixture
def bank(workspace, embedder):
    """An empty bank in the test's workspace folder."""
    opened = SkillBank.open(BankConfig(workspace=workspace), embedder=embedder)
    yield opened
    opened.close()
