"""Checks shared by every config dataclass: finite numbers in range, named in the error.

A NaN passes every comparison-based check (``nan <= 0`` and ``nan > 0`` are both False), so a
config that only compares would accept ``--lr nan`` and fail much later inside torch; every float
field is therefore checked with :func:`math.isfinite` first, in one place.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from typing import Any

from skillrl_core.errors import ConfigError

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
        return f" in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        return f" {'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f" {'<' if high_open else '<='} {high:g}"
    return ""


def int_fields(config_class: type) -> list[dataclasses.Field[Any]]:
    """Return the fields of a config dataclass annotated ``int`` (or ``int | None``)."""
    return _fields_annotated(config_class, _INT_TYPE)


def check_finite_fields(config: Any) -> None:
    """Check that every number field of ``config`` holds a number of its type (or None if typed so).

    A float field holds a finite number; an int field an integer (not a bool, not 1.5, not
    text such as a ``--env-option shuffle_seed=abc``); a bool field true or false. Call it
    first in ``__post_init__``; range checks then only need to compare.
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
