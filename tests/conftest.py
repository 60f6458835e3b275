"""Suite-wide test settings and fixtures: offline models, GPU tests skipped without a GPU, a
workspace, the embedder and a bank in the workspace."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session", autouse=True)
def model_cache(tmp_path_factory):
    """One per-user model cache for the whole session, never the user's own (~/.cache/skillrl):
    the embedded model is converted at most once per session, into a temp folder."""
    with pytest.MonkeyPatch.context() as patch:
        folder = tmp_path_factory.mktemp("skillrl-cache")
        patch.setenv("SKILLRL_CACHE", str(folder))
        yield folder


@pytest.fixture(autouse=True)
def env_registry(monkeypatch):
    """Each test registers environments into its own copy of the registry.

    The registry is a module-level table, and a user's environment registers itself when its
    module is imported (tests/envs/toy_env.py's "counter"); without a copy per test, whichever
    test imported it first decided what every later test saw in ``envs.registered()``.
    """
    from envs import registry

    monkeypatch.setattr(registry, "_SPECS", dict(registry._SPECS))
    monkeypatch.setattr(registry, "_LOADED", registry._LOADED)  # restored with the table


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A fresh, empty workspace folder, also exported as SKILLRL_WORKSPACE."""
    path = tmp_path / "workspace"
    path.mkdir()
    monkeypatch.setenv("SKILLRL_WORKSPACE", str(path))
    return path


@pytest.fixture(scope="session")
def embedder():
    """The real packaged all-MiniLM-L6-v2, loaded once (the CLI in this process reuses it)."""
    from memory.embedding import shared_embedder

    return shared_embedder()


@pytest.fixture
def bank(workspace, embedder):
    """An empty bank in the test's workspace folder, the one the CLI opens (the skill-bank
    tests override it with one bank per configured store)."""
    from memory import BankConfig, SkillBank

    opened = SkillBank.open(BankConfig(workspace=workspace), embedder=embedder)
    yield opened
    opened.close()
