"""Text Sokoban (gym-sokoban's rooms and rewards, RAGEN's text play): ``envs.make("sokoban")``.

Its :class:`envs.spec.EnvSpec` is ``envs.sokoban.spec.SPEC``.
"""

from __future__ import annotations

from envs.sokoban.agent_adapter import SokobanAgentAdapter
from envs.sokoban.config import DEFAULT_CATEGORIES, SokobanConfig
from envs.sokoban.env import SokobanEnv
from envs.sokoban.outcome import SokobanStepOutcome

__all__ = [
    "DEFAULT_CATEGORIES",
    "SokobanAgentAdapter",
    "SokobanConfig",
    "SokobanEnv",
    "SokobanStepOutcome",
]
