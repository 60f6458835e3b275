"""Environment registry: ``envs.make("webshop", **config)``."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from envs.base import TextEnv
from skillrl.errors import UnknownEnvError

EnvFactory = Callable[..., TextEnv]

_FACTORIES: dict[str, EnvFactory] = {}
_DESCRIPTIONS: dict[str, str] = {}


def register(env_id: str, factory: EnvFactory, description: str = "") -> None:
    """Register ``factory(**config) -> TextEnv`` under ``env_id``."""
    _FACTORIES[env_id] = factory
    _DESCRIPTIONS[env_id] = description


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
