"""What an environment is to the rest of skillrl: one :class:`EnvSpec` per environment.

A spec names everything the layers above need of an environment: its id and one-line
description, the factory that builds it and the config dataclass whose fields are the factory's
keyword arguments, the agent adapter (prompt, action grammar, expert; :mod:`envs.adapter`), the
distill adapter (:mod:`envs.distill_adapter`) and SkillRL's category table. Each built-in
environment defines its ``SPEC`` in ``envs/<name>/spec.py``; :mod:`envs.registry` lists those
modules by name and registers them, so no module registers anything by being imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from envs.adapter import ActionListAdapter, AgentAdapter
from envs.base import TextEnv
from envs.distill_adapter import DistillAdapter

EnvFactory = Callable[..., TextEnv]
"""``factory(**config) -> TextEnv``."""


@dataclass(frozen=True)
class EnvSpec:
    """One environment, as the registry holds it."""

    env_id: str
    """The id ``envs.make`` and ``--env`` take."""
    factory: EnvFactory
    """Builds the environment from keyword settings (the config class's fields)."""
    description: str = ""
    """One line for ``skillrl envs``."""
    config_class: type | None = None
    """The dataclass whose fields are the factory's keyword arguments: lets the registry check
    settings without building the environment (None: the environment takes none)."""
    adapter: AgentAdapter = field(default_factory=ActionListAdapter)
    """What the agent runtime knows of the environment (a plain action list by default)."""
    distill_adapter: DistillAdapter | None = None
    """What the distiller may know of it (None: it sees only trajectories)."""
    skillrl_categories: Mapping[str, str] = field(default_factory=dict)
    """SkillRL's skill-bank categories -> this environment's (the default table when a SkillRL
    bank is imported for it)."""

    def make(self, **config: Any) -> TextEnv:
        """Build the environment with ``config``."""
        return self.factory(**config)
