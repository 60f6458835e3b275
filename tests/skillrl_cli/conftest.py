"""Fixtures of the tests that drive the CLI: the packaged embedder, and a bank in the workspace."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memory import BankConfig, SkillBank

# Helpers of the layers' own tests serve the CLI's tests too: a tiny checkpoint and a scripted
# policy (trainers), sample bank entries (memory), sample episodes and paired-run fakes
# (the distiller's).
for helpers in ("trainers", "memory", "skillrl/distill"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / helpers))


@pytest.fixture(scope="session")
def embedder():
    """The packaged all-MiniLM-L6-v2, loaded once for every test that needs it."""
    from memory.embedding import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


@pytest.fixture
def bank(workspace, embedder):
    """An empty bank in the test's workspace folder (the one the CLI opens)."""
    opened = SkillBank.open(BankConfig(workspace=workspace), embedder=embedder)
    yield opened
    opened.close()
