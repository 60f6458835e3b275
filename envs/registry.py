"""Environment registry: ``envs.make("webshop", **config)``, one :class:`EnvSpec` per id.

An id is found in one of four places, looked up on first use so that ``import envs`` stays cheap:

- the built-in environments, listed by module name (:data:`BUILTIN_SPECS`);
- code that called :func:`register_spec` (or :func:`register` with the parts);
- the ``skillrl.envs`` entry-point group (:data:`ENTRY_POINT_GROUP`) of installed packages, as
  Gymnasium's plugins: the entry point's name is the id, its value names an :class:`EnvSpec`;
- a ``package.module:ATTRIBUTE`` reference naming an :class:`EnvSpec` (Gymnasium resolves
  ``module:Env`` ids the same way). The reference itself is the id, in every record that keeps
  one (episodes, skills, run folders), so a later command finds the environment again.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from envs.adapter import ActionListAdapter, AgentAdapter
from envs.base import TextEnv
from envs.distill_adapter import DistillAdapter, PlainDistillAdapter
from envs.spec import EnvFactory, EnvSpec
from skillrl_core.errors import ConfigError, UnknownEnvError

DEFAULT_ENV = "webshop"
"""The environment the CLI and the trainer play when none is named."""

ENV_HELP = "Environment id (`skillrl envs` lists them), or package.module:SPEC naming your own."
"""``--env``'s help, the same in every command."""

BUILTIN_SPECS = ("envs.webshop.spec", "envs.sokoban.spec")
"""Modules whose ``SPEC`` is a built-in environment, registered on first use (imported lazily,
so ``import envs`` stays cheap)."""

ENTRY_POINT_GROUP = "skillrl.envs"
"""The entry-point group installed packages declare environments in (name: the id; value:
``module:ATTRIBUTE`` naming an :class:`EnvSpec`)."""

_REFERENCE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
"""``package.module:ATTRIBUTE`` (the attribute may be dotted: ``module:Class.SPEC``)."""


@dataclass(frozen=True)
class RegisteredEnv:
    """One registered environment and where it came from (what ``skillrl envs`` lists)."""

    spec: EnvSpec
    source: str
    """Where the spec was found: ``built-in (module)``, ``entry point (...)``, a
    ``module:ATTRIBUTE`` reference, or ``registered in code``."""


_SPECS: dict[str, RegisteredEnv] = {}


def register_spec(spec: EnvSpec, source: str = "registered in code") -> None:
    """Register ``spec`` under its id (a later spec of the same id replaces it).

    ``source``: where it came from, as ``skillrl envs`` shows it.
    """
    _SPECS[spec.env_id] = RegisteredEnv(spec, source)


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
    return _SPECS[env_id].spec


def adapter_for(env_id: str) -> AgentAdapter:
    """Return the agent adapter registered with ``env_id`` (raises UnknownEnvError if none)."""
    return spec_of(env_id).adapter


def wanted_values(env_id: str, instruction: str) -> tuple[str, ...]:
    """Return the option values ``instruction`` names, as ``env_id``'s adapter reads them.

    What a turn's retrieval asks cases with; none for an environment not registered here.
    """
    return adapter_for(env_id).wanted_values(instruction) if env_id in registered() else ()


def skillrl_categories(env_id: str) -> dict[str, str]:
    """Return the SkillRL category -> ``env_id`` category table (empty when none is known)."""
    _load_builtins()
    if env_id not in _SPECS and (_is_reference(env_id) or env_id in _entry_points()):
        check_id(env_id)
    found = _SPECS.get(env_id)
    return dict(found.spec.skillrl_categories) if found is not None else {}


def distill_adapter_for(env_id: str) -> DistillAdapter:
    """Return ``env_id``'s distill adapter (a trajectory-only one when it registered none)."""
    return spec_of(env_id).distill_adapter or PlainDistillAdapter(env_id)


def registered() -> dict[str, str]:
    """Return registered environment ids and their one-line descriptions."""
    return {found.spec.env_id: found.spec.description for found in listing()}


def listing() -> list[RegisteredEnv]:
    """Return every registered environment (entry points loaded), by id.

    Raises UnknownEnvError naming the entry point that fails to load.
    """
    _load_builtins()
    for name in _entry_points():
        check_id(name)
    return [_SPECS[env_id] for env_id in sorted(_SPECS)]


def make(env_id: str, **config: Any) -> TextEnv:
    """Build the environment registered as ``env_id`` with ``config``."""
    return spec_of(env_id).make(**config)


def check_id(env_id: str) -> None:
    """Raise :class:`UnknownEnvError` unless ``env_id`` is registered (builds nothing).

    An entry point or a ``module:ATTRIBUTE`` reference not registered yet is imported and
    registered here; one that fails raises UnknownEnvError naming the id and the cause.
    """
    _load_builtins()
    if env_id in _SPECS:
        return
    entry_points = _entry_points()
    if env_id in entry_points:
        entry_point = entry_points[env_id]
        spec = _load_spec(env_id, entry_point.value, entry_point.load)
        dist = getattr(entry_point, "dist", None)  # None for an entry point built by hand
        found_in = f" in {dist.name}" if dist is not None else ""
        register_spec(
            dataclasses.replace(spec, env_id=env_id),
            f"entry point {ENTRY_POINT_GROUP}{found_in} ({entry_point.value})",
        )
        return
    if _is_reference(env_id):
        spec = _load_spec(env_id, env_id, lambda: _import_attribute(env_id))
        register_spec(dataclasses.replace(spec, env_id=env_id), env_id)
        return
    known = sorted({*_SPECS, *entry_points})
    close = difflib.get_close_matches(env_id, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    form = "" if ":" not in env_id else "; a reference is package.module:ATTRIBUTE"
    raise UnknownEnvError(
        f"unknown environment {env_id!r}{hint}{form} (registered: {', '.join(known) or 'none'})"
    )


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
        _SPECS.setdefault(spec.env_id, RegisteredEnv(spec, f"built-in ({name})"))


def _entry_points() -> dict[str, metadata.EntryPoint]:
    """Return the installed packages' ``skillrl.envs`` entry points by name (none imported)."""
    return {entry.name: entry for entry in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _is_reference(env_id: str) -> bool:
    """Return whether ``env_id`` is a ``package.module:ATTRIBUTE`` reference."""
    return _REFERENCE.fullmatch(env_id) is not None


def _import_attribute(reference: str) -> object:
    """Import ``package.module:ATTRIBUTE`` and return the attribute (errors propagate)."""
    module_name, attribute = reference.split(":")
    found: object = importlib.import_module(module_name)
    for part in attribute.split("."):
        found = getattr(found, part)
    return found


def _load_spec(env_id: str, reference: str, load: Callable[[], object]) -> EnvSpec:
    """Call ``load`` (which imports ``reference``) and return the :class:`EnvSpec` it gives.

    The user's module may fail in any way while it is imported, so every error becomes one
    UnknownEnvError naming the id, the reference and the cause.
    """
    try:
        found = load()
    except Exception as error:  # a user's module: any error it raises is a failed import
        cause = " ".join(f"{type(error).__name__}: {error}".split())  # one line
        raise UnknownEnvError(
            f"environment {env_id!r}: importing {reference!r} failed ({cause}); is the module "
            "in the folder you run from or on PYTHONPATH, and does it import?"
        ) from error
    if not isinstance(found, EnvSpec):
        raise UnknownEnvError(
            f"environment {env_id!r}: {reference!r} is a {type(found).__name__}, not an "
            "envs.EnvSpec; point it at the module's spec (e.g. SPEC = EnvSpec(...))"
        )
    return found


_LOADED = False
