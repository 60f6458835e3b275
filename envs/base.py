"""The text-environment contract, in Gymnasium's shape.

``reset(*, seed=None, options=None) -> (observation, info)`` and
``step(action) -> (observation, reward, terminated, truncated, info)``.

- ``terminated``: the episode really ended inside the task (WebShop: a purchase).
- ``truncated``: a limit outside the task ended it (the turn limit).
- Neither means success: ``info["success"]`` does.

Every ``info`` carries at least the keys in :data:`REQUIRED_INFO_KEYS`. When an episode ends,
``info["reward_breakdown"]`` explains the final reward (for WebShop: which attributes, options,
price bound and product type matched).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

REQUIRED_INFO_KEYS: tuple[str, ...] = (
    "available_actions",  # list[str]: admissible actions now, e.g. "click[buy now]"
    "action_valid",  # bool: whether the last action did anything (True after reset)
    "success",  # bool: whether the task is solved (only ever True at the end)
    "instruction",  # str: the task the agent is given
    "category",  # str: the task category (WebShop: the product category)
    "goal_id",  # str: stable id of the goal (same goal, same id, across runs)
)


@runtime_checkable
class TextEnv(Protocol):
    """A multi-turn text environment: string actions in, string observations out."""

    env_id: str

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode; ``options`` selects the goal (see each environment's docs)."""
        ...

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one action; an invalid action is a no-op flagged ``action_valid=False``."""
        ...
