"""Multi-turn text environments (Gymnasium-shaped, string actions)."""

from __future__ import annotations

from envs.adapter import ActionListAdapter, ActionRead, AgentAdapter, Expert
from envs.base import REQUIRED_INFO_KEYS, TextEnv
from envs.distill_adapter import DistillAdapter
from envs.registry import (
    DEFAULT_ENV,
    adapter_for,
    distill_adapter_for,
    make,
    register,
    register_spec,
    registered,
    skillrl_categories,
    spec_of,
    wanted_values,
)
from envs.spec import EnvSpec

__all__ = [
    "DEFAULT_ENV",
    "REQUIRED_INFO_KEYS",
    "ActionListAdapter",
    "ActionRead",
    "AgentAdapter",
    "DistillAdapter",
    "EnvSpec",
    "Expert",
    "TextEnv",
    "adapter_for",
    "distill_adapter_for",
    "make",
    "register",
    "register_spec",
    "registered",
    "skillrl_categories",
    "spec_of",
    "wanted_values",
]
