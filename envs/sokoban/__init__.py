"""Text Sokoban (gym-sokoban's rooms and rewards, RAGEN's text play): ``envs.make("sokoban")``."""

from __future__ import annotations

from typing import Any

from envs.registry import register
from envs.sokoban.agent import SokobanAgentAdapter
from envs.sokoban.config import DEFAULT_CATEGORIES, SokobanConfig
from envs.sokoban.distill import SokobanDistillAdapter
from envs.sokoban.env import SokobanEnv
from envs.sokoban.outcome import SokobanStepOutcome


def make_sokoban(**config: Any) -> SokobanEnv:
    """Build a :class:`SokobanEnv` from :class:`SokobanConfig` fields."""
    return SokobanEnv(SokobanConfig(**config))


register(
    "sokoban",
    make_sokoban,
    "Sokoban: push every box onto a target in generated rooms (6x6-1box, 7x7-2box, 8x8-3box).",
    config_class=SokobanConfig,
    adapter=SokobanAgentAdapter(),
    distill_adapter=SokobanDistillAdapter(),
)

__all__ = [
    "SokobanAgentAdapter",
    "DEFAULT_CATEGORIES",
    "SokobanConfig",
    "SokobanEnv",
    "SokobanStepOutcome",
    "make_sokoban",
]
