"""Shared fixtures for environment tests."""

from __future__ import annotations

from pathlib import Path

import pytest

import envs

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "webshop-data"


@pytest.fixture
def webshop():
    """A fresh WebShop env over the embedded catalog (the data is cached across envs)."""
    return envs.make("webshop")


def first_result(env, obs_info):
    """Search the goal's own query words and return the step result."""
    _, info = obs_info
    query = info["goal"]["instruction"].split(" with ")[0]
    return env.step(f"search[{query}]")
