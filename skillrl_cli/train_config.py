"""``skillrl train --config run.yaml``: a whole run's settings in one file, as TRL users keep them.

``--config`` takes a path, or the name of a recipe shipped with the package
(:data:`RECIPES`, ``--config webshop-rft``), so the README's commands run from any folder.

The file is a YAML mapping whose keys are the train command's option names (``goals-per-cycle``
or ``goals_per_cycle``; ``lora: true`` for ``--lora``; ``env-option`` as a mapping of
environment settings). It becomes click's ``default_map``, so options given on the command line
override it, and click converts and checks its values like typed ones. An unknown key is an
error naming it and the valid keys.

The resolved settings of every run (file, flags and defaults together) are saved once, by the
run itself, as the ``options`` of ``<run folder>/config.json`` (:mod:`trainers.run_settings`,
beside the configs they became): ``--resume`` takes every option not given on its command line
from there, and ``--config runs/<name>/config.json`` repeats a run (a YAML reader reads the
JSON; the file's ``options`` are taken). A run saved without options (a library caller's)
resumes only with the settings its configs hold, which the resume check compares.
"""

from __future__ import annotations

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


def _file_value(option: click.Option, key: str, value: Any, source: str) -> Any:
    if option.multiple:  # --env-option: a mapping of settings, or a list of KEY=VALUE
        if isinstance(value, dict):
            return [env_option_text(str(k), v) for k, v in value.items()]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
        raise click.BadParameter(
            f"{source}: {key!r} must be a mapping of settings or a list of KEY=VALUE strings"
        )
    if isinstance(value, dict | list):
        raise click.BadParameter(f"{source}: {key!r} must be a single value, not a {type(value)}")
    return value


def read_settings(path: Path, command: click.Command) -> dict[str, Any]:
    """Read a settings file into click's ``default_map`` form (option dest -> value).

    The file is a mapping of option names to values, or a run's ``config.json``, whose
    ``options`` are taken.
    """
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, RecursionError, yaml.YAMLError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else error
        raise click.BadParameter(f"cannot read {path}: {reason}") from error
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


def options_from_mapping(data: Any, command: click.Command, source: str) -> dict[str, Any]:
    """Check a mapping of option names to values and return it in ``default_map`` form."""
    if not isinstance(data, dict):
        raise click.BadParameter(f"{source} must hold a mapping of option names to values")
    keys = option_keys(command)
    settings: dict[str, Any] = {}
    for key, value in data.items():
        option = keys.get(str(key))
        if option is None:
            valid = sorted({primary_key(o) for o in keys.values()})
            raise click.BadParameter(
                f"{source}: unknown key {key!r}; valid keys: {', '.join(valid)}"
            )
        settings[str(option.name)] = _file_value(option, str(key), value, source)
    return settings


def _load_config(ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path | None:
    if value is not None:
        ctx.default_map = {**(ctx.default_map or {}), **read_settings(value, ctx.command)}
    return value


def config_option(command: Any) -> Any:
    """Add ``--config FILE`` (a YAML settings file; command-line options override it)."""
    return click.option(
        "--config",
        type=RecipeOrPath(),
        is_eager=True,  # read before the other options, so they can fall back to it
        expose_value=True,
        callback=_load_config,
        help="A YAML file of this command's options (keys = option names, e.g. "
        "goals-per-cycle: 8), a run's config.json to repeat it, or the name of a recipe "
        f"shipped with skillrl ({', '.join(shipped_recipes())}); options on the command "
        "line override it.",
    )(command)


def fill_from_saved(ctx: click.Context, values: dict[str, Any], folder: Path) -> bool:
    """On ``--resume``: take every option left at its default from the run's saved settings.

    Options given on the command line (or by ``--config``) keep their values; the run's own
    checks then refuse any that changes more than ``--cycles``. Returns whether a file was used.
    """
    from trainers.run_files import RunFiles
    from trainers.run_settings import saved_options

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
