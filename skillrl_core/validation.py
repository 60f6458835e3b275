"""Checks shared by every config dataclass: finite numbers in range, named in the error.

A NaN passes every comparison-based check (``nan <= 0`` and ``nan > 0`` are both False), so a
config that only compares would accept ``--lr nan`` and fail much later inside torch; every float
field is therefore checked with :func:`math.isfinite` first, in one place.

A field made with :func:`skillrl_core.option_fields.option` declares its bounds and choices once,
in its option spec: the command line turns them into click's ranges and choices, and
:func:`check_finite_fields` checks them when the config is constructed, so a library caller or a
settings file meets the same limits and a ``__post_init__`` only checks what the spec cannot say
(one field against another, fields that are not options).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from typing import Any

from skillrl_core.errors import ConfigError
from skillrl_core.option_fields import option_spec

_FLOAT_TYPE = re.compile(r"(float|float \| None|None \| float|Optional\[float\])")
_INT_TYPE = re.compile(r"(int|int \| None|None \| int|Optional\[int\])")


def _fields_annotated(config_class: type, pattern: re.Pattern[str]) -> list[dataclasses.Field[Any]]:
    """Return the fields of a config dataclass whose annotation matches ``pattern`` in full."""
    out = []
    for f in dataclasses.fields(config_class):
        annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        if pattern.fullmatch(str(annotation).strip()):
            out.append(f)
    return out


def float_fields(config_class: type) -> list[dataclasses.Field[Any]]:
    """Return the fields of a config dataclass annotated ``float`` (or ``float | None``)."""
    return _fields_annotated(config_class, _FLOAT_TYPE)


def check_number(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    """Raise :class:`ConfigError` unless ``value`` is a finite number within the bounds.

    Bounds are inclusive unless ``low_open``/``high_open``; the message names the field, the
    value and the allowed range, e.g. ``beta (nan) must be a finite number >= 0``.
    """
    wanted = _describe(low, high, low_open, high_open)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} ({value!r}) must be a number{wanted}")
    if not math.isfinite(value):
        raise ConfigError(f"{name} ({value}) must be a finite number{wanted}")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        raise ConfigError(f"{name} ({value}) must be{wanted}")


def _describe(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        opening, closing = "(" if low_open else "[", ")" if high_open else "]"
        return f" in {opening}{_bound(low)}, {_bound(high)}{closing}"
    if low is not None:
        return f" {'>' if low_open else '>='} {_bound(low)}"
    if high is not None:
        return f" {'<' if high_open else '<='} {_bound(high)}"
    return ""


def _bound(value: float) -> str:
    """Write a bound as a reader would: ``0``, ``0.5``, ``4294967295`` (not ``4.29497e+09``)."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def int_fields(config_class: type) -> list[dataclasses.Field[Any]]:
    """Return the fields of a config dataclass annotated ``int`` (or ``int | None``)."""
    return _fields_annotated(config_class, _INT_TYPE)


def check_finite_fields(config: Any) -> None:
    """Check every field of ``config`` against its declaration; raise :class:`ConfigError`.

    A float field holds a finite number; an int field an integer (not a bool, not 1.5, not
    text such as a ``--env-option shuffle_seed=abc``); a bool field true or false (or None
    where typed so). An option field then lies within the bounds and choices its option spec
    declares (:func:`check_declared_options`). Call it first in ``__post_init__``, which then
    only checks what no single field's declaration says.
    """
    for f in float_fields(type(config)):
        value = getattr(config, f.name)
        if value is None and "None" in str(f.type):
            continue
        check_number(f.name, value)
    for f in int_fields(type(config)):
        value = getattr(config, f.name)
        if value is None and "None" in str(f.type):
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ConfigError(f"{f.name} ({value!r}) must be an integer")
    for f in dataclasses.fields(config):
        if str(f.type).strip() == "bool" and not isinstance(getattr(config, f.name), bool):
            raise ConfigError(f"{f.name} ({getattr(config, f.name)!r}) must be true or false")
    check_declared_options(config)


def check_declared_options(config: Any) -> None:
    """Check each option field of ``config`` against the bounds and choices its spec declares.

    None passes where the field allows it (an option left open); a repeated field's every item
    must be one of the choices. The message names the field, the value and what is allowed, as
    ``gamma (1.5) must be in [0, 1]`` or ``loss_type ('x') must be one of dapo, bnpo``.
    """
    for f in dataclasses.fields(config):
        spec = option_spec(f)
        value = getattr(config, f.name)
        if spec is None or value is None:
            continue
        allowed = ", ".join(spec.choices or ())
        if isinstance(value, (tuple, list)):  # a repeated option: --source expert --source bank
            if spec.choices is not None and any(item not in spec.choices for item in value):
                raise ConfigError(f"{f.name} ({value!r}) may hold only {allowed}")
        elif spec.choices is not None and value not in spec.choices:
            raise ConfigError(f"{f.name} ({value!r}) must be one of {allowed}")
        if spec.low is None and spec.high is None:
            continue
        for item in value if isinstance(value, (tuple, list)) else (value,):
            check_number(
                f.name,
                item,
                low=spec.low,
                high=spec.high,
                low_open=spec.low_open,
                high_open=spec.high_open,
            )
