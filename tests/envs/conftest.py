"""Shared fixtures for environment tests."""

from __future__ import annotations

import pytest

import envs


@pytest.fixture
def webshop():
    """A fresh WebShop env over the embedded catalog (the data is cached across envs)."""
    return envs.make("webshop")
