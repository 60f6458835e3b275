"""Bank and retrieval configs reject bad values with a message naming the field."""

from __future__ import annotations

import pytest

from memory import BankConfig, RetrievalConfig
from skillrl_core.errors import ConfigError


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"merge_threshold": 1.5}, "merge_threshold"),
        ({"merge_threshold": 0}, "merge_threshold"),
        ({"on_mismatch": "shrug"}, "on_mismatch"),
        ({"embedder": ""}, "embedder"),
        ({"chroma_url": "localhost:8000"}, "chroma_url"),
        ({"collection": "a b"}, "collection"),
        ({"busy_timeout_s": -1}, "busy_timeout_s"),
    ],
)
def test_bank_config_names_the_bad_field(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        BankConfig(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"k_task": -1}, "k_task"),
        ({"k_general": 1.5}, "k_general"),
        ({"min_similarity": 2.0}, "min_similarity"),
    ],  # fmt: skip
)
def test_retrieval_config_names_the_bad_field(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        RetrievalConfig(**kwargs)


def test_default_locations_are_in_the_workspace(tmp_path):
    config = BankConfig(workspace=tmp_path)
    assert config.resolved_database_url == f"sqlite:///{tmp_path / 'bank.sqlite'}"
    assert config.chroma_path == tmp_path / "chroma"
    assert BankConfig(database_url="postgresql+psycopg://u@h/db").resolved_database_url.startswith(
        "postgresql+psycopg://"
    )
