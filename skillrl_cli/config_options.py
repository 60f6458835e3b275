"""Click options generated from config dataclasses: a setting is declared once, on its field.

TRL's ``HfArgumentParser`` is the pattern: each field made with
:func:`skillrl_core.option_fields.option` becomes ``--<field-name>`` (plus its aliases), typed
from the field's annotation (bool: an on/off switch; ``X | None``: optional; a tuple: repeatable;
``choices``, ``low`` and ``high`` from its spec), with the field's help and default. The command
receives click's values keyed by field name and builds the dataclass with :func:`build`; the
settings a run saves are read back from the built objects with :func:`saved_values`, so what is
saved is what the run used.

Why not ``HfArgumentParser`` itself: it builds argparse parsers, and the commands are click
commands (``--config`` files as click's ``default_map``, parameter sources for ``--resume``,
one error style); this module is the click side of the same idea.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, Union

import click

from skillrl_core.option_fields import OptionSpec, option_spec

T = TypeVar("T")


@dataclass(frozen=True)
class OptionGroup:
    """The options one command takes from one config dataclass."""

    config: type
    """The dataclass whose option fields become options."""
    prefix: str = ""
    """Put before every option and value name (``cold_start`` gives ``--cold-start-goals``),
    for a config whose field names would clash with another group's."""
    only: tuple[str, ...] | None = None
    """The fields this command offers (None: every option field)."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """This command's own default for a field, where it differs from the config's."""
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Further spellings this command accepts for a field (older flags of the command)."""
    helps: Mapping[str, str] = field(default_factory=dict)
    """This command's own help for a field, where its default or use differs."""

    def fields(self) -> list[tuple[dataclasses.Field[Any], OptionSpec]]:
        """Return the option fields of the group, in declaration order."""
        chosen = []
        for item in dataclasses.fields(self.config):
            spec = option_spec(item)
            if spec is None or (self.only is not None and item.name not in self.only):
                continue
            chosen.append((item, spec))
        if self.only is not None:
            missing = set(self.only) - {item.name for item, _spec in chosen}
            if missing:
                raise TypeError(f"{self.config.__name__} has no option fields {sorted(missing)}")
        return chosen

    def dest(self, name: str) -> str:
        """Return the key of field ``name``'s value in the command's values."""
        return f"{self.prefix}_{name}" if self.prefix else name

    def flag(self, name: str) -> str:
        """Return the field's own option name (``--cold-start-goals``)."""
        return "--" + self.dest(name).replace("_", "-")


def config_options(*groups: OptionGroup) -> Callable[[T], T]:
    """Decorate a click command with the options of ``groups`` (in their declaration order)."""
    declared = [
        _click_option(group, item, spec) for group in groups for item, spec in group.fields()
    ]

    def decorate(command: T) -> T:
        for make in reversed(declared):  # click lists options in the order they are applied last
            command = make(command)
        return command

    return decorate


def build(group: OptionGroup, values: Mapping[str, Any], **given: Any) -> Any:
    """Build the group's dataclass from the command's values; ``given`` sets further fields.

    ``given`` is what the command derives rather than reads: fields that are no option of the
    group (the environment settings it checked, the LoRA alpha of a rank), or an option's value
    resolved (``--rollout-dtype auto`` as the dtype it picked).
    """
    kwargs = {}
    for item, _spec in group.fields():
        value = values[group.dest(item.name)]
        kwargs[item.name] = tuple(value) if isinstance(value, list) else value
    return group.config(**{**kwargs, **given})


def saved_values(
    group: OptionGroup, config: Any, leave_out: Collection[str] = ()
) -> dict[str, Any]:
    """Return the group's options as a settings file holds them (option name -> value).

    ``leave_out`` names fields that say how to run rather than what (``resume``).
    """
    saved = {}
    for item, _spec in group.fields():
        if item.name in leave_out:
            continue
        value = getattr(config, item.name)
        saved[group.flag(item.name).removeprefix("--")] = (
            list(value) if isinstance(value, tuple) else value
        )
    return saved


def _click_option(
    group: OptionGroup, item: dataclasses.Field[Any], spec: OptionSpec
) -> Callable[[Any], Any]:
    kind, repeated = _value_type(group.config, item.name)
    flag = group.flag(item.name)
    # A prefixed group's fields are another command's settings: their own spellings (--lr)
    # would clash with this command's, so only the group's aliases apply.
    own = () if group.prefix else spec.aliases
    aliases = (*own, *group.aliases.get(item.name, ()))
    default = group.defaults.get(item.name, _default_of(item))
    settings: dict[str, Any] = {
        "default": default,
        "help": group.helps.get(item.name, spec.help),
        "show_default": spec.show_default and default is not None,
    }
    if spec.envvar:
        settings["envvar"] = spec.envvar
    if spec.metavar:
        settings["metavar"] = spec.metavar
    if spec.words is not None:
        return _worded_switch(group, item, spec, kind, settings, spec.words)
    if kind is bool:  # an on/off pair; with ``bool | None`` the default None leaves it open
        negative = spec.negative or "--no-" + flag.removeprefix("--")
        decls = [f"{flag}/{negative}", *(f"{a}/--no-{a.removeprefix('--')}" for a in aliases)]
        return click.option(*decls, group.dest(item.name), **settings)
    settings["type"] = _click_type(kind, spec)
    if repeated:
        settings["multiple"] = True
    return click.option(flag, *aliases, group.dest(item.name), **settings)


def _worded_switch(
    group: OptionGroup,
    item: dataclasses.Field[Any],
    spec: OptionSpec,
    kind: type,
    settings: dict[str, Any],
    bare_and_off: tuple[Any, Any],
) -> Callable[[Any], Any]:
    """``--skills [on|off]`` (bare: on) with its off switch ``--no-skills``, as one option."""
    bare, off = bare_and_off
    flag, dest = group.flag(item.name), group.dest(item.name)
    aliases = (*(() if group.prefix else spec.aliases), *group.aliases.get(item.name, ()))
    words = ("on", "off") if kind is bool else tuple(spec.choices or ())
    return click.option(
        flag,
        *aliases,
        dest,
        cls=WordedSwitch,
        negative=spec.negative or "--no-" + flag.removeprefix("--"),
        off=off,
        type=click.BOOL if kind is bool else _click_type(kind, spec),
        is_flag=False,
        flag_value=bare,
        **{"metavar": f"[{'|'.join(words)}]", **settings},
    )


class WordedSwitch(click.Option):
    """An option that takes a word or none (``--skills``, ``--skills off``), with an off switch.

    The off switch (``--no-skills``) stores ``off`` into the same value, as the second flag of
    click's on/off pairs does.
    """

    def __init__(self, *args: Any, negative: str, off: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.negative = negative
        self.off = off

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        """Register the option, then its off switch under the same destination."""
        super().add_to_parser(parser, ctx)
        parser.add_option(
            obj=self, opts=[self.negative], dest=self.name, action="store_const", const=self.off
        )

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        """Name the off switch beside the option (``--skills [on|off] / --no-skills``)."""
        record = super().get_help_record(ctx)
        return None if record is None else (f"{record[0]} / {self.negative}", record[1])


def _default_of(item: dataclasses.Field[Any]) -> Any:
    if item.default is not dataclasses.MISSING:
        return item.default
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    raise TypeError(f"option field {item.name} needs a default")


def _value_type(cls: type, name: str) -> tuple[type, bool]:
    """(element type, whether it is a repeated tuple) of a field; ``X | None`` reads as X."""
    hint = typing.get_type_hints(cls)[name]
    if typing.get_origin(hint) in (Union, types.UnionType):
        (hint,) = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is tuple:
        return typing.get_args(hint)[0], True
    return hint, False


def _click_type(kind: type, spec: OptionSpec) -> Any:
    if spec.choices is not None:
        return click.Choice(spec.choices)
    bounds = spec.low is not None or spec.high is not None
    if kind is int:
        if not bounds:
            return int
        low = None if spec.low is None else int(spec.low)
        high = None if spec.high is None else int(spec.high)
        return click.IntRange(low, high, min_open=spec.low_open, max_open=spec.high_open)
    if kind is float:
        if not bounds:
            return float
        return click.FloatRange(
            spec.low, spec.high, min_open=spec.low_open, max_open=spec.high_open
        )
    if kind is str:
        return str
    raise TypeError(f"no command-line type for {kind!r}")
