"""Environment registry: ``envs.make("webshop", **config)``."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping
from typing import Any

from envs.adapter import ActionListAdapter, AgentAdapter
from envs.base import TextEnv
from envs.distill_adapter import DistillAdapter, PlainDistillAdapter
from skillrl_core.errors import ConfigError, UnknownEnvError

EnvFactory = Callable[..., TextEnv]

DEFAULT_ENV = "webshop"
"""The environment the CLI and the trainer play when none is named."""

_FACTORIES: dict[str, EnvFactory] = {}
_DESCRIPTIONS: dict[str, str] = {}
_SKILLRL_CATEGORIES: dict[str, dict[str, str]] = {}
_CONFIGS: dict[str, type] = {}
_ADAPTERS: dict[str, AgentAdapter] = {}
_DISTILL_ADAPTERS: dict[str, DistillAdapter] = {}


def register(
    env_id: str,
    factory: EnvFactory,
    description: str = "",
    config_class: type | None = None,
    *,
    skillrl_categories: Mapping[str, str] | None = None,
    adapter: AgentAdapter | None = None,
    distill_adapter: DistillAdapter | None = None,
) -> None:
    """Register ``factory(**config) -> TextEnv`` under ``env_id``.

    ``config_class``: the dataclass whose fields are the factory's keyword arguments (lets
    :func:`check_config` validate settings without building the environment).
    ``skillrl_categories`` maps SkillRL's skill-bank categories to this environment's (the
    default table when a SkillRL bank is imported for ``env_id``).
    ``adapter``: what the agent runtime knows of the environment (its prompt, action grammar,
    score, expert; see :mod:`envs.adapter`); None: a plain :class:`ActionListAdapter`.
    ``distill_adapter``: what the distiller may know about the environment (see
    :mod:`envs.distill_adapter`); without one it sees only trajectories.
    """
    _FACTORIES[env_id] = factory
    _DESCRIPTIONS[env_id] = description
    _SKILLRL_CATEGORIES[env_id] = dict(skillrl_categories or {})
    if config_class is not None:
        _CONFIGS[env_id] = config_class
    _ADAPTERS[env_id] = adapter if adapter is not None else ActionListAdapter()
    if distill_adapter is not None:
        _DISTILL_ADAPTERS[env_id] = distill_adapter


def adapter_for(env_id: str) -> AgentAdapter:
    """Return the agent adapter registered with ``env_id`` (raises UnknownEnvError if none)."""
    check_id(env_id)
    return _ADAPTERS[env_id]


def skillrl_categories(env_id: str) -> dict[str, str]:
    """Return the SkillRL category -> ``env_id`` category table (empty when none is known)."""
    _load_builtins()
    return dict(_SKILLRL_CATEGORIES.get(env_id, {}))


def distill_adapter_for(env_id: str) -> DistillAdapter:
    """Return ``env_id``'s distill adapter (a trajectory-only one when it registered none)."""
    check_id(env_id)
    return _DISTILL_ADAPTERS.get(env_id) or PlainDistillAdapter(env_id)


def registered() -> dict[str, str]:
    """Return registered environment ids and their one-line descriptions."""
    _load_builtins()
    return dict(sorted(_DESCRIPTIONS.items()))


def make(env_id: str, **config: Any) -> TextEnv:
    """Build the environment registered as ``env_id`` with ``config``."""
    check_id(env_id)
    return _FACTORIES[env_id](**config)


def check_id(env_id: str) -> None:
    """Raise :class:`UnknownEnvError` unless ``env_id`` is registered (builds nothing)."""
    _load_builtins()
    if env_id in _FACTORIES:
        return
    close = difflib.get_close_matches(env_id, list(_FACTORIES), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    known = ", ".join(sorted(_FACTORIES)) or "none"
    raise UnknownEnvError(f"unknown environment {env_id!r}{hint} (registered: {known})")


def config_fields(env_id: str) -> list[str]:
    """Names of the settings ``env_id`` takes (its config dataclass's fields; [] if none)."""
    check_id(env_id)
    config_class = _CONFIGS.get(env_id)
    return [f.name for f in dataclasses.fields(config_class)] if config_class else []


def check_config(env_id: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``settings`` for ``env_id`` without building it; returns them as a dict.

    Unknown keys raise :class:`ConfigError` naming the key and the valid ones; values are
    checked by constructing the environment's config dataclass (its ``__post_init__``).
    """
    valid = config_fields(env_id)
    for key in settings:
        if key not in valid:
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"unknown option {key!r} for environment {env_id!r}{hint}; "
                f"valid: {', '.join(valid) or 'none'}"
            )
    if valid:
        try:
            _CONFIGS[env_id](**settings)
        except TypeError as error:  # e.g. a number compared with a string in __post_init__
            raise ConfigError(
                f"invalid option value for environment {env_id!r}: {error}"
            ) from error
    return dict(settings)


def _load_builtins() -> None:
    # Imported lazily so `import envs` stays cheap; each built-in registers itself on import.
    import envs.sokoban  # noqa: F401
    import envs.webshop  # noqa: F401
