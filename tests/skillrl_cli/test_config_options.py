"""Options generated from config fields: one declaration, one name from the flag to its use."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import skillrl_cli.train as train_command
from cli import main
from skillrl_cli.config_options import OptionGroup, build, config_options, saved_values
from skillrl_cli.train_config import options_from_mapping
from skillrl_cli.train_setup import TRAIN_OPTIONS
from skillrl_core.option_fields import option, option_spec


@dataclass(frozen=True)
class Sample:
    """A config with one field of every kind the generator reads."""

    rate: float = option(0.5, help="A rate.", low=0, high=1, aliases=("-r",))
    count: int = option(3, help="A count.", low=1)
    mode: str = option("a", help="A mode.", choices=("a", "b"))
    on: bool = option(True, help="A switch.", negative="--off", aliases=("--enabled",))
    maybe: bool | None = option(None, help="Decided later when not given.")
    limit: int | None = option(None, help="An optional limit.", low=1)
    names: tuple[str, ...] = option((), help="Repeatable.", aliases=("--name",))
    hidden: int = 7
    """Not an option: no spec."""


def _command(*groups: OptionGroup) -> click.Command:
    @click.command()
    @config_options(*groups)
    def command(**values: object) -> None:
        command.received = values  # what click handed the command (read by _values)

    return command


def _values(command: click.Command, *args: str) -> dict[str, object]:
    result = CliRunner().invoke(command, list(args))
    assert result.exit_code == 0, result.output
    return command.received


def test_every_option_field_becomes_an_option_named_after_it_with_its_help_and_default():
    command = _command(OptionGroup(Sample))
    by_name = {p.name: p for p in command.params}
    assert set(by_name) == {"rate", "count", "mode", "on", "maybe", "limit", "names"}
    assert by_name["rate"].opts == ["--rate", "-r"] and by_name["rate"].help == "A rate."
    assert by_name["on"].opts == ["--on", "--enabled"] and "--off" in by_name["on"].secondary_opts
    assert _values(command) == {
        "rate": 0.5, "count": 3, "mode": "a", "on": True, "maybe": None, "limit": None,
        "names": (),
    }  # fmt: skip
    given = _values(command, "-r", "1", "--count", "2", "--mode", "b", "--off", "--maybe",
                    "--limit", "4", "--name", "x", "--names", "y")  # fmt: skip
    assert given == {"rate": 1.0, "count": 2, "mode": "b", "on": False, "maybe": True,
                     "limit": 4, "names": ("x", "y")}  # fmt: skip


@pytest.mark.parametrize(
    "args", [["--rate", "2"], ["--count", "0"], ["--mode", "c"], ["--limit", "0"]]
)
def test_a_value_outside_the_field_spec_is_a_usage_error_naming_the_option(args):
    result = CliRunner().invoke(_command(OptionGroup(Sample)), args)
    assert result.exit_code == 2 and args[0] in result.output


def test_a_prefixed_group_takes_only_its_own_aliases_defaults_and_helps():
    group = OptionGroup(
        Sample,
        prefix="inner",
        only=("rate", "count"),
        defaults={"count": 9},
        aliases={"rate": ("--inner-r",)},
        helps={"count": "The inner count."},
    )
    command = _command(group)
    by_name = {p.name: p for p in command.params}
    assert set(by_name) == {"inner_rate", "inner_count"}
    assert by_name["inner_rate"].opts == ["--inner-rate", "--inner-r"]  # not -r: another's
    assert by_name["inner_count"].default == 9 and by_name["inner_count"].help == "The inner count."
    built = build(group, _values(command, "--inner-r", "0.25"))
    assert (built.rate, built.count, built.mode) == (0.25, 9, "a")


def test_only_must_name_option_fields():
    with pytest.raises(TypeError, match="hidden"):
        OptionGroup(Sample, only=("hidden",)).fields()


def test_built_configs_save_under_the_option_names_that_read_them_back():
    group = OptionGroup(Sample)
    command = _command(group)
    built = build(group, _values(command, "--count", "5", "--name", "x"), mode="b")
    assert built.mode == "b" and built.hidden == 7  # given replaces the option's value
    saved = saved_values(group, built)
    assert saved == {"rate": 0.5, "count": 5, "mode": "b", "on": True, "maybe": None,
                     "limit": None, "names": ["x"]}  # fmt: skip
    assert build(group, options_from_mapping(saved, command, "saved")) == built
    assert "count" not in saved_values(group, built, leave_out={"count"})


# -- skillrl train: every generated option reaches the config field of its name ----------------

MECHANICS = {"env_options", "config", "workspace", "as_json"}
"""Options of ``train`` that are no config field: where and how to run, not what."""


def test_every_train_option_is_a_config_field_or_a_named_mechanic():
    dests = {group.dest(f.name) for group in TRAIN_OPTIONS for f, _spec in group.fields()}
    params = {p.name for p in train_command.train.params if isinstance(p, click.Option)}
    assert params - dests == MECHANICS
    assert dests <= params


def _other_value(config: type, field: dataclasses.Field) -> tuple[str, ...]:
    """Return command-line words that set ``field`` to a valid value other than its default."""
    spec = option_spec(field)
    default = field.default
    flag = "--" + field.name.replace("_", "-")
    if isinstance(default, bool):
        return (flag,) if not default else (spec.negative or f"--no-{flag[2:]}",)
    if spec.choices:
        return (flag, next(c for c in spec.choices if c not in (default, "auto")))
    if isinstance(default, int):
        return (flag, str(default + 1))
    if isinstance(default, float):
        high = spec.high if spec.high is not None else default + 1
        return (flag, repr((default + high) / 2 if default < high else default / 2))
    if default is None and spec.low is not None:  # an optional count: its least valid value
        return (flag, str(int(spec.low)))
    raise AssertionError(f"no other value for {config.__name__}.{field.name}")


SKIPPED = {"env_id", "eval_split", "report_to", "epsilon_high", "max_prompt_tokens"}
"""Fields whose other values need more than the command line (another environment, a split,
a tracker extra) or are checked against the environment's prompt (the budget)."""


NEEDS_EVAL_SPLIT = {"patience", "test_goals"}
"""Fields that choose a checkpoint, which only evaluation goals of another split than test do."""

NEEDS_LORA = {"lora_layers"}
"""Fields that shape a LoRA update, which --full refuses."""


@pytest.fixture
def started(monkeypatch):
    runs = []

    def capture(settings, processes, **_display):
        runs.append(settings)
        raise RuntimeError("started")

    monkeypatch.setattr(train_command, "run_with_progress", capture)
    return runs


@pytest.mark.parametrize(
    ("group", "field"),
    [
        (group, field)
        for group in TRAIN_OPTIONS[:2]  # the cycle's and the update's fields
        for field, _spec in group.fields()
        if field.name not in SKIPPED
    ],
    ids=lambda v: v.name if isinstance(v, dataclasses.Field) else v.config.__name__,
)
def test_each_train_option_sets_the_field_of_its_name(workspace, started, group, field):
    words = _other_value(group.config, field)
    if field.name in NEEDS_EVAL_SPLIT:
        words = ("--eval-split", "eval", *words)
    if field.name in NEEDS_LORA:
        words = ("--lora", *words)
    result = CliRunner().invoke(main, ["train", "--run-name", "t", "--max-turns", "8", *words])
    assert str(result.exception) == "started", result.output
    settings = started[0]
    built = settings.cycle if group is TRAIN_OPTIONS[0] else settings.grpo
    assert getattr(built, field.name) != field.default, words
    key = field.name.replace("_", "-")  # the name it is saved under, the option's own
    assert settings.options[key] == getattr(built, field.name)


@given(st.text(max_size=40))
def test_a_comma_list_of_integers_reads_back_or_is_a_usage_error_naming_its_option(text):
    from skillrl_cli.eval import int_list

    try:
        numbers = int_list("--k", text)
    except click.BadParameter as error:
        assert error.param_hint == "--k"
        return
    assert numbers and numbers == tuple(int(v) for v in text.split(",") if v.strip())
