"""``skillrl train --config run.yaml``: a whole run's settings in one file, as TRL users keep them.

``--config`` takes a path, or the name of a recipe shipped with the package
(:data:`RECIPES`, ``--config webshop-rft``), so the README's commands run from any folder.

The file is a YAML mapping whose keys are the train command's option names (``goals-per-cycle``
or ``goals_per_cycle``; ``lora: true`` for ``--lora``; ``env-option`` as a mapping of
environment settings). It becomes click's ``default_map``, so options given on the command line
override it. Every value is checked before anything loads, by its option's own click type, as
the text a user would type for it (``cycles: 2.5`` is refused as ``--cycles 2.5`` is, where
YAML's number would have been cut to 2); a date, a set or a list for a single value, a key
given twice (or under two names, ``learning-rate`` and ``lr``), an unknown key and a second
``--config`` are refused in one line naming them.

The resolved settings of every run (file, flags and defaults together) are saved once, by the
run itself, as the ``options`` of ``<run folder>/config.json`` (:mod:`trainers.cycle.run_settings`,
beside the configs they became): ``--resume`` takes every option not given on its command line
from there, and ``--config runs/<name>/config.json`` repeats a run (a YAML reader reads the
JSON; the file's ``options`` are taken). A run saved without options (a library caller's)
resumes only with the settings its configs hold, which the resume check compares.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from skillrl_cli.options import env_option_text

NOT_IN_FILE = frozenset({"config", "resume", "as_json", "workspace", "help"})
"""Options a settings file does not hold: they say where and how to run, not what."""

NOT_RESUMED = frozenset({"run_name"})
"""Options ``--resume`` never takes from the saved file (they locate the run)."""

RECIPES = Path(__file__).resolve().parent / "recipes"
"""The recipes the package ships (``<name>.yaml``), named on the command line by ``<name>``."""


def shipped_recipes() -> list[str]:
    """Return the names of the shipped recipes, sorted."""
    return sorted(path.stem for path in RECIPES.glob("*.yaml"))


class RecipeOrPath(click.ParamType):
    """A settings file: a path to one, or the name of a recipe the package ships."""

    name = "FILE|RECIPE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        """Return the file's path: ``value`` itself when it is a file, else the shipped recipe."""
        if isinstance(value, Path):
            value = str(value)
        path = Path(value).expanduser()
        if path.is_file():
            return path
        if path.exists():
            self.fail(f"{value!r} is a folder, not a settings file", param, ctx)
        shipped = RECIPES / f"{value}.yaml"
        if "/" not in value and shipped.is_file():
            return shipped
        names = ", ".join(shipped_recipes()) or "none"
        self.fail(
            f"{value!r} is neither a file nor a shipped recipe; shipped recipes: {names}",
            param,
            ctx,
        )


def _options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option) and p.name not in NOT_IN_FILE]


def primary_key(option: click.Option) -> str:
    """Return the key an option is saved under: its first long name without dashes."""
    longs = [o for o in option.opts if o.startswith("--")]
    return (longs[0] if longs else option.opts[0]).lstrip("-")


def option_keys(command: click.Command) -> dict[str, click.Option]:
    """Every key a settings file may use for each option (names with - or _, and the dest)."""
    keys: dict[str, click.Option] = {}
    for option in _options(command):
        names = [o.lstrip("-") for o in option.opts if o.startswith("--")] + [str(option.name)]
        for name in names:
            keys[name] = keys[name.replace("-", "_")] = keys[name.replace("_", "-")] = option
    return keys


SCALARS = (str, int, float)
"""Types of the values a settings file may give a single-valued option (bool is an int)."""


KIND_WORDS: dict[type, str] = {
    date: "a date",
    dict: "a mapping",
    list: "a list",
    set: "a set",
    bytes: "binary data",
}
"""How a refusal names a YAML value that is no single value (a datetime is a date)."""


def _file_value(option: click.Option, key: str, value: Any, source: str) -> Any:
    """Check one file value by its option's command-line rules; return it converted.

    A scalar is checked as the text a user would type for it (``cycles: 2.5`` is refused as
    ``--cycles 2.5`` is; a YAML ``true`` reads as ``true``); null is taken only by an option
    whose default is none. Anything else (a date, a set, a list, binary) is refused, naming the key.
    """
    if option.multiple:  # --env-option: a mapping of settings, or a list of KEY=VALUE
        if isinstance(value, dict):
            return [env_option_text(str(k), v) for k, v in value.items()]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
        raise click.BadParameter(
            f"{source}: {key!r} must be a mapping of settings or a list of KEY=VALUE strings"
        )
    if value is None:
        if option.default is not None:  # its command line has no way to say "none" either
            raise click.BadParameter(f"{source}: {key!r} needs a value, not null")
        return None
    if not isinstance(value, SCALARS):
        kind = next((w for t, w in KIND_WORDS.items() if isinstance(value, t)), "a collection")
        raise click.BadParameter(f"{source}: {key!r} must be a single value, not {kind}")
    if isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = repr(value) if isinstance(value, float) else str(value)
    try:
        return option.type.convert(text, option, None)
    except click.BadParameter as error:
        raise click.BadParameter(f"{source}: {key!r}: {error.message}") from error


def _unique_keys_loader() -> type:
    """Return a ``yaml.SafeLoader`` that refuses a mapping holding the same key twice.

    PyYAML keeps the last of two equal keys silently; in a settings file the first one is a
    setting the user wrote and would lose. Keys merged in with ``<<`` may still be overridden.
    """
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _value_node in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        duplicate = key in seen
                        seen.add(key)
                    except TypeError:  # unhashable: PyYAML's own error names it
                        continue
                    if duplicate:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key!r}", key_node.start_mark
                        )
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def read_settings(path: Path, command: click.Command) -> dict[str, Any]:
    """Read a settings file into click's ``default_map`` form (option dest -> value).

    The file is a mapping of option names to values, or a run's ``config.json``, whose
    ``options`` are taken. A key given twice is refused.
    """
    import yaml

    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_unique_keys_loader())
    except (OSError, UnicodeDecodeError, RecursionError, yaml.YAMLError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else error
        raise click.BadParameter(f"cannot read {path}: {one_line(str(reason))}") from error
    if data is None:
        return {}
    if isinstance(data, dict) and {"cycle", "grpo"} <= data.keys():  # a run's config.json
        if not isinstance(data.get("options"), dict):
            raise click.BadParameter(
                f"{path} is a run's settings without the options it was launched with "
                "(a run started from Python, not from `skillrl train`)"
            )
        data = data["options"]
    return options_from_mapping(data, command, str(path))


def one_line(text: str) -> str:
    """``text`` with its line breaks and runs of spaces folded (YAML errors span lines)."""
    return " ".join(text.split())


def options_from_mapping(data: Any, command: click.Command, source: str) -> dict[str, Any]:
    """Check a mapping of option names to values and return it in ``default_map`` form.

    Each value is checked as its option is on the command line; an option set twice (under
    its name and an alias, ``learning-rate`` and ``lr``) is refused.
    """
    if not isinstance(data, dict):
        raise click.BadParameter(f"{source} must hold a mapping of option names to values")
    keys = option_keys(command)
    settings: dict[str, Any] = {}
    given: dict[str, str] = {}
    for key, value in data.items():
        option = keys.get(str(key))
        if option is None:
            raise click.BadParameter(_unknown_key(key, keys, command, source))
        name = str(option.name)
        if name in given:
            raise click.BadParameter(
                f"{source}: {given[name]!r} and {key!r} both set --{primary_key(option)}; keep one"
            )
        given[name] = str(key)
        settings[name] = _file_value(option, str(key), value, source)
    return settings


def _unknown_key(
    key: Any, keys: dict[str, click.Option], command: click.Command, source: str
) -> str:
    """Return the refusal of a key no file option takes (one the file cannot hold says so)."""
    held_elsewhere = {
        name.lstrip("-").replace("_", "-"): name
        for p in command.params
        if isinstance(p, click.Option) and p.name in NOT_IN_FILE
        for name in p.opts
        if name.startswith("--")
    }
    flag = held_elsewhere.get(str(key).replace("_", "-"))
    if flag is not None:
        return (
            f"{source}: {key!r} is an option a settings file does not hold (it says where or how "
            f"to run, not what): give {flag} on the command line"
        )
    valid = sorted({primary_key(o) for o in keys.values()})
    return f"{source}: unknown key {key!r}; valid keys: {', '.join(valid)}"


def _load_config(
    ctx: click.Context, _param: click.Parameter, value: tuple[Path, ...]
) -> Path | None:
    if len(value) > 1:
        files = ", ".join(str(v) for v in value)
        raise click.BadParameter(
            f"given {len(value)} times ({files}): give one settings file (options on the "
            "command line override it)"
        )
    if not value:
        return None
    ctx.default_map = {**(ctx.default_map or {}), **read_settings(value[0], ctx.command)}
    return value[0]


def config_option(command: Any) -> Any:
    """Add ``--config FILE`` (a YAML settings file; command-line options override it)."""
    return click.option(
        "--config",
        type=RecipeOrPath(),
        multiple=True,  # so that a second --config is refused, not silently the one read
        is_eager=True,  # read before the other options, so they can fall back to it
        expose_value=True,
        callback=_load_config,
        help="A YAML file of this command's options (keys = option names, e.g. "
        "goals-per-cycle: 8), a run's config.json to repeat it, or the name of a recipe "
        f"shipped with skillrl ({', '.join(shipped_recipes())}); options on the command "
        "line override it. One file: a second --config is refused. Each value is checked as "
        "on the command line; a key given twice (or under two names) is refused.",
    )(command)


def fill_from_saved(ctx: click.Context, values: dict[str, Any], folder: Path) -> bool:
    """On ``--resume``: take every option left at its default from the run's saved settings.

    Options given on the command line (or by ``--config``) keep their values; the run's own
    checks then refuse any that changes more than ``--cycles``. Returns whether a file was used.
    """
    from trainers.cycle.run_files import RunFiles
    from trainers.cycle.run_settings import saved_options

    files = RunFiles(folder)
    options = saved_options(files)
    if options is None:
        return False
    saved = options_from_mapping(options, ctx.command, str(files.config_path))
    for option in _options(ctx.command):
        name = str(option.name)
        if name in NOT_RESUMED or name not in saved:
            continue
        if ctx.get_parameter_source(name) is ParameterSource.DEFAULT:
            values[name] = option.process_value(ctx, saved[name])
    return True


def option_sources(ctx: click.Context) -> dict[str, str]:
    """Where each option's value came from, by saved key, in words for a resume refusal."""
    config = ctx.params.get("config")
    words = {
        ParameterSource.COMMANDLINE: "the command line",
        ParameterSource.ENVIRONMENT: "an environment variable",
        ParameterSource.DEFAULT_MAP: f"--config {config}" if config else "--config",
        ParameterSource.DEFAULT: "the default",
        ParameterSource.PROMPT: "a prompt",
    }
    return {
        primary_key(option): words.get(ctx.get_parameter_source(str(option.name)), "?")
        for option in _options(ctx.command)
    }
