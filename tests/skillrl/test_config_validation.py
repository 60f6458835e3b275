"""Every config dataclass refuses non-finite floats with a ConfigError naming field and value."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
import typing

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from envs.sokoban.config import SokobanConfig
from envs.webshop.config import WebShopConfig
from memory.config import BankConfig, RetrievalConfig
from skillrl.agents.llm import LLMAgentConfig
from skillrl.distill.analytic import AnalyticConfig
from skillrl.distill.bootstrap import BootstrapConfig
from skillrl.distill.evolve import EvolveConfig
from skillrl.distill.paired_utility import PairedUtilityConfig
from skillrl.distill.pipeline import PipelineConfig
from skillrl.distill.teacher import TeacherConfig
from skillrl.distill.upkeep import UpkeepConfig
from skillrl.policies.base import SamplingConfig
from skillrl.policies.config import PolicyConfig

# Config class -> the arguments it needs besides the field under test.
from skillrl.policies.model_settings import ModelSettings  # noqa: E402
from skillrl.prompts.builder import PromptConfig
from skillrl.rollout import RolloutConfig
from skillrl_cli.library import EvalSettings, PlaySettings
from skillrl_core.errors import ConfigError
from skillrl_core.option_fields import option_spec
from skillrl_core.validation import check_number, float_fields
from trainers.cold_start.sft_config import ColdStartConfig
from trainers.common.lora import LoraSettings
from trainers.cycle.config import CycleConfig
from trainers.cycle.processes import Processes
from trainers.cycle.rewards import InvalidActionPenalty, LLMJudgeReward, TurnCost
from trainers.evaluate import EvalConfig
from trainers.update.config import GRPOConfig

CONFIGS: dict[type, dict] = {
    BankConfig: {}, RetrievalConfig: {}, LLMAgentConfig: {}, AnalyticConfig: {},
    BootstrapConfig: {}, EvolveConfig: {}, PipelineConfig: {}, TeacherConfig: {},
    UpkeepConfig: {}, SamplingConfig: {}, PolicyConfig: {}, PromptConfig: {}, RolloutConfig: {},
    CycleConfig: {}, GRPOConfig: {}, EvalConfig: {}, InvalidActionPenalty: {}, TurnCost: {},
    LLMJudgeReward: {"policy": None, "sampling": None}, WebShopConfig: {}, SokobanConfig: {},
    ColdStartConfig: {}, Processes: {}, PairedUtilityConfig: {}, LoraSettings: {},
    ModelSettings: {"env_id": "webshop", "skills": True, "max_prompt_tokens": 512},
    EvalSettings: {"policy": PolicyConfig(), "config": EvalConfig()},
    PlaySettings: {"player": "expert"},
}  # fmt: skip
CASES = [
    (cls, f.name, value)
    for cls in CONFIGS
    for f in float_fields(cls)
    for value in (float("nan"), float("inf"), float("-inf"))
]


def test_every_float_field_of_the_configs_is_covered():
    # A guard on the introspection itself: these are known float fields.
    names = {(cls.__name__, name) for cls, name, _ in CASES}
    assert {("GRPOConfig", "learning_rate"), ("GRPOConfig", "epsilon_high"),
            ("CycleConfig", "turn_cost"), ("RetrievalConfig", "min_similarity"),
            ("BankConfig", "merge_threshold"), ("UpkeepConfig", "retire_below"),
            ("SamplingConfig", "temperature"), ("TurnCost", "cost")} <= names  # fmt: skip


def _config_classes_in_the_project() -> set[type]:
    found = set()
    for package in ("memory", "skillrl", "trainers", "envs", "skillrl_cli"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if "migrations" in info.name:
                continue
            try:
                module = importlib.import_module(info.name)
            except ImportError:  # an optional backend (vllm, trl) that is not installed
                continue
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and dataclasses.is_dataclass(value)
                    and value.__module__ == module.__name__
                    and "__post_init__" in vars(value)
                ):
                    found.add(value)
    return found


def test_every_validated_dataclass_of_the_project_is_in_the_table():
    missing = {c.__name__ for c in _config_classes_in_the_project()} - {c.__name__ for c in CONFIGS}
    assert not missing, f"add these configs to CONFIGS: {sorted(missing)}"


@pytest.mark.parametrize(("cls", "name", "value"), CASES,
                         ids=lambda v: getattr(v, "__name__", str(v)))  # fmt: skip
def test_non_finite_floats_are_refused_naming_field_and_value(cls, name, value):
    with pytest.raises(ConfigError, match=rf"^{name} \({value}\) must be a finite number"):
        cls(**CONFIGS[cls], **{name: value})


@pytest.mark.parametrize("cls", list(CONFIGS), ids=lambda c: c.__name__)
def test_defaults_are_valid(cls):
    cls(**CONFIGS[cls])


@pytest.mark.parametrize(
    ("cls", "name", "value", "message"),
    [
        (TeacherConfig, "temperature", -1.0, "temperature (-1.0) must be >= 0"),
        (UpkeepConfig, "retire_below", 0.5, "retire_below (0.5) must be in (-1, 0]"),
        (BootstrapConfig, "episodes", 0, "episodes (0) must be >= 1"),
        (GRPOConfig, "lora_dropout", 1.0, "lora_dropout (1.0) must be in [0, 1)"),
        (ColdStartConfig, "lora_dropout", 1.0, "lora_dropout (1.0) must be in [0, 1)"),
        (GRPOConfig, "weight_decay", -0.1, "weight_decay (-0.1) must be >= 0"),
        (GRPOConfig, "learning_rate", "fast", "learning_rate ('fast') must be a number"),
        (EvalConfig, "temperature", -0.5, "temperature (-0.5) must be >= 0"),
    ],
)
def test_out_of_range_values_raise_config_error(cls, name, value, message):
    with pytest.raises(ConfigError) as caught:
        cls(**{name: value})
    assert str(caught.value) == message


@given(
    value=st.floats(allow_nan=True, allow_infinity=True),
    low=st.none() | st.floats(-10, 10),
    low_open=st.booleans(),
)
def test_check_number_accepts_exactly_the_finite_values_in_range(value, low, low_open):
    import math

    ok = math.isfinite(value) and (low is None or (value > low if low_open else value >= low))
    try:
        check_number("x", value, low=low, low_open=low_open)
    except ConfigError as e:
        assert not ok and str(e).startswith(f"x ({value}) must be")
    else:
        assert ok


def test_train_refuses_a_nan_learning_rate_in_one_line(tmp_path):
    from cli import main

    result = CliRunner().invoke(
        main, ["train", "--lr", "nan", "--workspace", str(tmp_path / "ws"), "--cycles", "1"]
    )
    assert result.exit_code != 0 and isinstance(result.exception, SystemExit), result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "learning_rate (nan)" in lines[0], result.output


def _value_kind(cls: type, name: str) -> type:
    """int, float, str or tuple: what a field holds (``X | None`` reads as X)."""
    hint = typing.get_type_hints(cls)[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is tuple:
        return tuple
    return args[0] if args and typing.get_origin(hint) is not tuple else hint


def _outside(spec, kind: type) -> list:
    """Values just outside what ``spec`` declares (a wrong choice, each side of each bound)."""
    if spec.choices is not None:
        return [("bogus",)] if kind is tuple else ["bogus"]
    step = 1 if kind is int else 1e-3
    values = []
    if spec.low is not None:
        values.append(spec.low if spec.low_open else spec.low - step)
    if spec.high is not None:
        values.append(spec.high if spec.high_open else spec.high + step)
    return [kind(v) for v in values]


DECLARED = [
    (cls, f.name, value)
    for cls in CONFIGS
    for f in dataclasses.fields(cls)
    if (spec := option_spec(f)) is not None
    for value in _outside(spec, _value_kind(cls, f.name))
]


def test_the_declared_bounds_cover_the_options_that_have_them():
    names = {(cls.__name__, name) for cls, name, _ in DECLARED}
    assert {("GRPOConfig", "gamma"), ("GRPOConfig", "loss_type"), ("CycleConfig", "seed"),
            ("CycleConfig", "group_size"), ("ColdStartConfig", "sources"),
            ("ColdStartConfig", "skill_placebo"), ("PromptConfig", "max_prompt_tokens"),
            ("EvalConfig", "samples")} <= names  # fmt: skip


@pytest.mark.parametrize(("cls", "name", "value"), DECLARED,
                         ids=lambda v: getattr(v, "__name__", str(v)))  # fmt: skip
def test_a_value_outside_an_options_declaration_is_refused_when_the_config_is_built(
    cls, name, value
):
    # The bound lives once, in the option spec; the command line and the constructor read it.
    with pytest.raises(ConfigError, match=rf"^{name} \({re.escape(repr(value))}\) (must|may)"):
        cls(**CONFIGS[cls], **{name: value})


@pytest.mark.parametrize(
    ("cls", "name", "value", "message"),
    [
        (GRPOConfig, "gamma", 1.5, "gamma (1.5) must be in [0, 1]"),
        (GRPOConfig, "temperature", 0.0, "temperature (0.0) must be > 0"),
        (GRPOConfig, "loss_type", "x", "loss_type ('x') must be one of dapo, bnpo, grpo, dr_grpo"),
        (CycleConfig, "seed", -1, "seed (-1) must be in [0, 4294967295]"),
        (CycleConfig, "group_size", 1, "group_size (1) must be >= 2"),
        (ColdStartConfig, "sources", ("expert", "x"),
         "sources (('expert', 'x')) may hold only expert, bank, teacher"),
        (ColdStartConfig, "skill_withhold", 1.0, "skill_withhold (1.0) must be in [0, 1)"),
    ],
)  # fmt: skip
def test_a_declared_bound_is_named_with_field_value_and_range(cls, name, value, message):
    with pytest.raises(ConfigError) as caught:
        cls(**{name: value})
    assert str(caught.value) == message
