"""Environment registry: ``envs.make("webshop", **config)``."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from envs.base import TextEnv
from skillrl.errors import UnknownEnvError

EnvFactory = Callable[..., TextEnv]

_FACTORIES: dict[str, EnvFactory] = {}
_DESCRIPTIONS: dict[str, str] = {}
_SKILLRL_CATEGORIES: dict[str, dict[str, str]] = {}


def register(
    env_id: str,
    factory: EnvFactory,
    description: str = "",
    *,
    skillrl_categories: Mapping[str, str] | None = None,
) -> None:
    """Register ``factory(**config) -> TextEnv`` under ``env_id``.

    ``skillrl_categories`` maps SkillRL's skill-bank categories to this environment's (the
    default table when a SkillRL bank is imported for ``env_id``).
    """
    _FACTORIES[env_id] = factory
    _DESCRIPTIONS[env_id] = description
    _SKILLRL_CATEGORIES[env_id] = dict(skillrl_categories or {})


def skillrl_categories(env_id: str) -> dict[str, str]:
    """Return the SkillRL category -> ``env_id`` category table (empty when none is known)."""
    _load_builtins()
    return dict(_SKILLRL_CATEGORIES.get(env_id, {}))


def registered() -> dict[str, str]:
    """Return registered environment ids and their one-line descriptions."""
    _load_builtins()
    return dict(sorted(_DESCRIPTIONS.items()))


def make(env_id: str, **config: Any) -> TextEnv:
    """Build the environment registered as ``env_id`` with ``config``."""
    _load_builtins()
    try:
        factory = _FACTORIES[env_id]
    except KeyError:
        close = difflib.get_close_matches(env_id, list(_FACTORIES), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        known = ", ".join(sorted(_FACTORIES)) or "none"
        raise UnknownEnvError(
            f"unknown environment {env_id!r}{hint} (registered: {known})"
        ) from None
    return factory(**config)


def _load_builtins() -> None:
    # Imported lazily so `import envs` stays cheap; each built-in registers itself on import.
    import envs.webshop  # noqa: F401
