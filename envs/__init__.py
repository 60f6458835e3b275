"""Multi-turn text environments (Gymnasium-shaped, string actions)."""

from __future__ import annotations

from envs.base import REQUIRED_INFO_KEYS, TextEnv
from envs.distill_adapter import DistillAdapter
from envs.registry import distill_adapter_for, make, register, registered, skillrl_categories

__all__ = [
    "REQUIRED_INFO_KEYS",
    "DistillAdapter",
    "TextEnv",
    "distill_adapter_for",
    "make",
    "register",
    "registered",
    "skillrl_categories",
]
