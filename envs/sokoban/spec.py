"""Sokoban's :class:`envs.spec.EnvSpec` (registered by :mod:`envs.registry`)."""

from __future__ import annotations

from typing import Any

from envs.sokoban.agent_adapter import SokobanAgentAdapter
from envs.sokoban.config import SokobanConfig
from envs.sokoban.distill_adapter import SokobanDistillAdapter
from envs.sokoban.env import SokobanEnv
from envs.spec import EnvSpec


def make_sokoban(**config: Any) -> SokobanEnv:
    """Build a :class:`SokobanEnv` from :class:`SokobanConfig` fields."""
    return SokobanEnv(SokobanConfig(**config))


SPEC = EnvSpec(
    "sokoban",
    make_sokoban,
    "Sokoban: push every box onto a target in generated rooms (6x6-1box, 7x7-2box, 8x8-3box).",
    config_class=SokobanConfig,
    adapter=SokobanAgentAdapter(),
    distill_adapter=SokobanDistillAdapter(),
)
