"""Multi-turn text environments (Gymnasium-shaped, string actions)."""

from __future__ import annotations

from envs.base import REQUIRED_INFO_KEYS, TextEnv
from envs.registry import make, register, registered, skillrl_categories

__all__ = ["REQUIRED_INFO_KEYS", "TextEnv", "make", "register", "registered", "skillrl_categories"]
