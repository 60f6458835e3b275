"""Every command opens the bank the same way: one configuration rule, one seeding rule."""

from __future__ import annotations

import pytest

from skillrl_cli.bank_access import bank_config, open_bank


@pytest.fixture
def no_bank_variables(monkeypatch):
    for name in ("SKILLRL_DATABASE_URL", "SKILLRL_CHROMA_URL", "SKILLRL_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)


def test_locations_fall_back_to_their_variables_and_given_ones_win(
    workspace, monkeypatch, no_bank_variables
):
    plain = bank_config(workspace)
    assert (plain.database_url, plain.chroma_url, plain.embedder) == (
        None,
        None,
        "all-MiniLM-L6-v2",
    )
    assert plain.workspace == workspace.resolve()
    monkeypatch.setenv("SKILLRL_DATABASE_URL", "sqlite:///from-env.sqlite")
    monkeypatch.setenv("SKILLRL_CHROMA_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("SKILLRL_EMBEDDER", "/models/other-embedder")
    from_env = bank_config(None)  # the workspace too: $SKILLRL_WORKSPACE
    assert from_env.workspace == workspace.resolve()
    assert from_env.database_url == "sqlite:///from-env.sqlite"
    assert from_env.chroma_url == "http://127.0.0.1:1"
    assert from_env.embedder == "/models/other-embedder"
    given = bank_config(workspace, database_url="sqlite:///given.sqlite", embedder="mine")
    assert (given.database_url, given.embedder) == ("sqlite:///given.sqlite", "mine")
    assert bank_config(workspace, read_only=True).read_only


@pytest.mark.slow
def test_a_played_bank_is_seeded_once_and_a_read_only_one_never(workspace, no_bank_variables):
    with open_bank(workspace, "webshop") as bank:
        seeded = bank.count(status=None)
    assert seeded > 0
    with open_bank(workspace, "webshop") as bank:  # not seeded twice
        assert bank.count(status=None) == seeded
    empty = workspace / "other"
    with open_bank(empty, "webshop", seed=False) as bank:
        assert bank.count(status=None) == 0
