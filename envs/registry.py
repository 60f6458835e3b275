"""Environment registry: ``envs.make("webshop", **config)``, one :class:`EnvSpec` per id.

The built-in environments are listed by module name (:data:`BUILTIN_SPECS`) and registered on
first use; other environments call :func:`register_spec` (or :func:`register` with the parts).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from envs.adapter import ActionListAdapter, AgentAdapter
from envs.base import TextEnv
from envs.distill_adapter import DistillAdapter, PlainDistillAdapter
from envs.spec import EnvFactory, EnvSpec
from skillrl_core.errors import ConfigError, UnknownEnvError

DEFAULT_ENV = "webshop"
"""The environment the CLI and the trainer play when none is named."""

BUILTIN_SPECS = ("envs.webshop.spec", "envs.sokoban.spec")
"""Modules whose ``SPEC`` is a built-in environment, registered on first use (imported lazily,
so ``import envs`` stays cheap)."""

_SPECS: dict[str, EnvSpec] = {}


def register_spec(spec: EnvSpec) -> None:
    """Register ``spec`` under its id (a later spec of the same id replaces it)."""
    _SPECS[spec.env_id] = spec


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
    """Register an environment from its parts (an :class:`EnvSpec` built for you).

    ``config_class``: the dataclass whose fields are the factory's keyword arguments (lets
    :func:`check_config` validate settings without building the environment).
    ``skillrl_categories`` maps SkillRL's skill-bank categories to this environment's.
    ``adapter``: what the agent runtime knows of the environment (see :mod:`envs.adapter`);
    None: a plain :class:`ActionListAdapter`. ``distill_adapter``: what the distiller may know
    about it (see :mod:`envs.distill_adapter`); without one it sees only trajectories.
    """
    register_spec(
        EnvSpec(
            env_id,
            factory,
            description,
            config_class,
            adapter if adapter is not None else ActionListAdapter(),
            distill_adapter,
            dict(skillrl_categories or {}),
        )
    )


def spec_of(env_id: str) -> EnvSpec:
    """Return the spec registered as ``env_id`` (raises UnknownEnvError if none)."""
    check_id(env_id)
    return _SPECS[env_id]


def adapter_for(env_id: str) -> AgentAdapter:
    """Return the agent adapter registered with ``env_id`` (raises UnknownEnvError if none)."""
    return spec_of(env_id).adapter


def skillrl_categories(env_id: str) -> dict[str, str]:
    """Return the SkillRL category -> ``env_id`` category table (empty when none is known)."""
    _load_builtins()
    spec = _SPECS.get(env_id)
    return dict(spec.skillrl_categories) if spec is not None else {}


def distill_adapter_for(env_id: str) -> DistillAdapter:
    """Return ``env_id``'s distill adapter (a trajectory-only one when it registered none)."""
    return spec_of(env_id).distill_adapter or PlainDistillAdapter(env_id)


def registered() -> dict[str, str]:
    """Return registered environment ids and their one-line descriptions."""
    _load_builtins()
    return {env_id: _SPECS[env_id].description for env_id in sorted(_SPECS)}


def make(env_id: str, **config: Any) -> TextEnv:
    """Build the environment registered as ``env_id`` with ``config``."""
    return spec_of(env_id).make(**config)


def check_id(env_id: str) -> None:
    """Raise :class:`UnknownEnvError` unless ``env_id`` is registered (builds nothing)."""
    _load_builtins()
    if env_id in _SPECS:
        return
    close = difflib.get_close_matches(env_id, list(_SPECS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    known = ", ".join(sorted(_SPECS)) or "none"
    raise UnknownEnvError(f"unknown environment {env_id!r}{hint} (registered: {known})")


def config_fields(env_id: str) -> list[str]:
    """Names of the settings ``env_id`` takes (its config dataclass's fields; [] if none)."""
    config_class = spec_of(env_id).config_class
    return [f.name for f in dataclasses.fields(config_class)] if config_class else []


def takes_turn_limit(env_id: str) -> bool:
    """Return whether ``env_id`` keeps a turn limit of its own (a ``max_turns`` setting).

    A field of its config class or, without one, a keyword of its factory.
    """
    if "max_turns" in config_fields(env_id):
        return True
    try:
        parameters = inspect.signature(spec_of(env_id).factory).parameters
    except (TypeError, ValueError):  # a factory Python cannot inspect (a C extension)
        return False
    return "max_turns" in parameters


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
            spec_of(env_id).config_class(**settings)
        except TypeError as error:  # e.g. a number compared with a string in __post_init__
            raise ConfigError(
                f"invalid option value for environment {env_id!r}: {error}"
            ) from error
    return dict(settings)


def _load_builtins() -> None:
    """Register the built-in specs not registered yet (once each; later calls cost a lookup)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for name in BUILTIN_SPECS:
        spec = importlib.import_module(name).SPEC
        _SPECS.setdefault(spec.env_id, spec)


_LOADED = False
