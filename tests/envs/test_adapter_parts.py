"""The agent adapter's contract is five small parts, and each consumer calls only its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import envs
from envs.adapter import (
    ActionGrammar,
    ActionListAdapter,
    AgentAdapter,
    EpisodeRules,
    ExpertSource,
    HumanPlay,
    PromptText,
)

PARTS = (PromptText, ActionGrammar, EpisodeRules, ExpertSource, HumanPlay)
ROOT = Path(__file__).resolve().parents[2]

CONSUMERS = {
    "skillrl/prompts/builder.py": (PromptText,),
    "skillrl/parsing.py": (ActionGrammar,),
    "skillrl/agents/llm.py": (ActionGrammar,),
    "skillrl/episode_records.py": (EpisodeRules,),
    "trainers/common/policy_rollouts.py": (EpisodeRules,),
    "trainers/cold_start/cold_start.py": (EpisodeRules,),
    "skillrl_cli/upfront_checks.py": (EpisodeRules,),
    "skillrl/agents/expert.py": (ExpertSource,),
    "skillrl_cli/bootstrap.py": (ExpertSource,),
    "trainers/cold_start/sft_data.py": (ActionGrammar, ExpertSource),
    "skillrl/agents/human.py": (HumanPlay,),
    "skillrl_cli/run_display.py": (HumanPlay,),
}


def methods(protocol: type) -> set[str]:
    """The methods a protocol itself declares (not those of its bases)."""
    return {name for name, value in vars(protocol).items() if callable(value) and name[0] != "_"}


def contract() -> set[str]:
    """Every method of the whole adapter contract."""
    return {name for part in PARTS for name in methods(part)}


def test_the_adapter_is_its_five_parts_and_nothing_else():
    assert methods(AgentAdapter) == set()
    assert set(AgentAdapter.__mro__) >= set(PARTS)
    sizes = [len(methods(part)) for part in PARTS]
    assert sum(sizes) == len(contract()), "a method is declared in two parts"
    assert max(sizes) <= 6


@pytest.mark.parametrize("env_id", ["webshop", "sokoban"])
def test_builtin_adapters_implement_every_part(env_id):
    adapter = envs.adapter_for(env_id)
    assert all(isinstance(adapter, part) for part in (*PARTS, AgentAdapter))
    assert all(isinstance(ActionListAdapter(), part) for part in PARTS)


@pytest.mark.parametrize("path", sorted(CONSUMERS))
def test_each_consumer_calls_only_the_parts_it_names(path):
    allowed = set().union(*(methods(part) for part in CONSUMERS[path]))
    called = set(re.findall(r"\.(\w+)\(", (ROOT / path).read_text())) & contract()
    assert called, f"{path} calls no adapter method: drop it from CONSUMERS"
    assert called <= allowed, f"{path} calls {sorted(called - allowed)} outside its parts"
