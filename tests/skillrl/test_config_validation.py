"""Every config dataclass refuses non-finite floats with a ConfigError naming field and value."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

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
from skillrl_cli.library import EvalSettings
from skillrl_core.errors import ConfigError
from skillrl_core.validation import check_number, float_fields
from trainers.config import CycleConfig, GRPOConfig
from trainers.evaluate import EvalConfig
from trainers.processes import Processes
from trainers.rewards import InvalidActionPenalty, LLMJudgeReward, TurnCost
from trainers.sft_config import ColdStartConfig

CONFIGS: dict[type, dict] = {
    BankConfig: {}, RetrievalConfig: {}, LLMAgentConfig: {}, AnalyticConfig: {},
    BootstrapConfig: {}, EvolveConfig: {}, PipelineConfig: {}, TeacherConfig: {},
    UpkeepConfig: {}, SamplingConfig: {}, PolicyConfig: {}, PromptConfig: {}, RolloutConfig: {},
    CycleConfig: {}, GRPOConfig: {}, EvalConfig: {}, InvalidActionPenalty: {}, TurnCost: {},
    LLMJudgeReward: {"policy": None, "sampling": None}, WebShopConfig: {}, SokobanConfig: {},
    ColdStartConfig: {}, Processes: {}, PairedUtilityConfig: {},
    ModelSettings: {"env_id": "webshop", "skills": True, "max_prompt_tokens": 512},
    EvalSettings: {"policy": PolicyConfig(), "config": EvalConfig()},
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
