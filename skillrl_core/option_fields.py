"""Config fields that are also command options: declared once, on the field that uses them.

A field made with :func:`option` carries its help text and how a command line spells it in its
metadata, as plain data (this layer imports no click). ``skillrl_cli.config_options`` turns such
fields into click options named after the field (``per_device_train_batch_size`` becomes
``--per-device-train-batch-size``), the way TRL's ``HfArgumentParser`` turns dataclass fields
into arguments; the command then builds the dataclass from its values. So a setting has one name
from the flag to its use, and its help is its documentation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass
from typing import Any

SEED_MAX = 2**32 - 1
"""Largest seed numpy, torch and the environments all accept (seeds are 0..SEED_MAX)."""

OPTION_KEY = "option"
"""Key of a field's :class:`OptionSpec` in its ``dataclasses.field`` metadata."""


@dataclass(frozen=True)
class OptionSpec:
    """How a config field reads on a command line."""

    help: str
    """What the setting does, for ``--help`` and for readers of the config."""
    aliases: tuple[str, ...] = ()
    """Further spellings (``--lr``, an older name kept so scripts and settings files still
    work). The field's own name comes first and is the one runs save."""
    negative: str | None = None
    """The off switch of a boolean (``--full`` for ``--use-peft``); default ``--no-<name>``."""
    choices: tuple[str, ...] | None = None
    """The values allowed, for a string field."""
    low: float | None = None
    """Smallest value allowed (checked on the command line and when the config is constructed:
    :func:`skillrl_core.validation.check_finite_fields`)."""
    high: float | None = None
    """Largest value allowed."""
    low_open: bool = False
    """``low`` itself is not allowed."""
    high_open: bool = False
    """``high`` itself is not allowed."""
    show_default: bool = True
    """Show the default in ``--help``."""
    envvar: str | None = None
    """An environment variable that sets it when the command line does not."""
    metavar: str | None = None
    """How ``--help`` names the value (``N|FIRST-LAST``)."""
    words: tuple[Any, Any] | None = None
    """A switch that also takes a word: (what the bare option means, what ``negative`` means).
    ``--skills`` alone is the first, ``--skills off`` the word given, ``--no-skills`` the second;
    a ``bool`` field reads on/off (or yes/no, true/false), a string field its ``choices``."""


def option(
    default: Any = MISSING, *, help: str, default_factory: Any = MISSING, **spec: Any
) -> Any:
    """Declare a config field that is also a command option (``spec``: :class:`OptionSpec`)."""
    metadata = {OPTION_KEY: OptionSpec(help=help, **spec)}
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def option_spec(field: dataclasses.Field[Any]) -> OptionSpec | None:
    """Return how ``field`` reads on a command line; None: it is not an option."""
    spec = field.metadata.get(OPTION_KEY)
    return spec if isinstance(spec, OptionSpec) else None
