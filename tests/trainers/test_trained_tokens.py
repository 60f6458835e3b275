"""What the learner trains on is what acted: recorded tokens produce the executed action."""

from __future__ import annotations

import re

import pytest
from trainer_helpers import episode

from skillrl.agents.base import AgentState
from skillrl.agents.llm import LLMAgent, LLMAgentConfig
from skillrl.policies.base import SamplingConfig
from trainers.update.batching import build_samples

CLICKS = ["click[back to search]", "click[b0abc12345]", "click[x-large]", "click[buy now]"]
TAG = re.compile(r"</?\w+>")


def _with_tokens(record, substituted: list[bool]):
    for i, (turn, flag) in enumerate(zip(record.turns, substituted, strict=True)):
        turn.prompt_token_ids = [1, 2, 3 + i]
        turn.completion_token_ids = [10 + i, 11 + i]
        turn.completion_logprobs = [-0.5, -0.5]
        turn.action_substituted = flag
    return record


def test_substituted_turns_are_left_out_of_the_loss():
    record = _with_tokens(episode(["search", "results", "item"], score=1.0), [True, False, False])
    samples = build_samples([record], [[1.0, 1.0, 1.0]], keep_zero_advantage=True)
    assert [s.completion_ids for s in samples] == [[11, 12], [12, 13]]
    honest = _with_tokens(episode(["search", "results"], score=1.0), [False, False])
    assert len(build_samples([honest], [[1.0, 1.0]])) == 2


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    from tiny_checkpoint import write_tiny_checkpoint
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from skillrl.policies.transformers_backend import TransformersPolicy

    folder = write_tiny_checkpoint(tmp_path_factory.mktemp("tiny"))
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    return TransformersPolicy(model, AutoTokenizer.from_pretrained(folder))


def _state(actions: list[str], turn: int = 0) -> AgentState:
    return AgentState(
        episode_id=f"e{turn}",
        env_id="webshop",
        instruction="i want a x-large red shirt, price lower than 30.00 dollars",
        category="fashion",
        observation="Back to search [SEP] B0ABC12345 [SEP] Red shirt [SEP] $20.00",
        available_actions=actions,
        turn=turn,
    )


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_constrained_click_tokens_decode_to_the_executed_action(tiny_policy, temperature):
    config = LLMAgentConfig(sampling=SamplingConfig(temperature=temperature, seed=1))
    agent = LLMAgent(tiny_policy, constrained=True, config=config)
    decisions = agent.act([_state(CLICKS, turn=t) for t in range(8)])
    decode = tiny_policy.tokenizer.decode
    for d in decisions:
        assert d.action in CLICKS and not d.action_substituted
        # The trained completion is exactly the executed action in the policy's output format,
        # continuing a prompt that ends with the "<action>" the agent prefilled.
        assert decode(d.completion_token_ids) == f"{d.action}</action>"
        assert decode(d.prompt_token_ids).endswith("<action>")
        assert len(d.completion_logprobs) == len(d.completion_token_ids)


def test_sampled_search_tokens_write_the_executed_query(tiny_policy):
    config = LLMAgentConfig(sampling=SamplingConfig(temperature=1.0, seed=5), query_tokens=12)
    agent = LLMAgent(tiny_policy, constrained=True, config=config)
    decisions = agent.act([_state(["search[<query>]"], turn=t) for t in range(6)])
    decode = tiny_policy.tokenizer.decode
    for d in decisions:
        assert not d.action_substituted  # sampled: never replaced by the task's words
        written = decode(d.completion_token_ids, skip_special_tokens=True).split("]")[0]
        query = " ".join(TAG.sub(" ", written).replace("[", " ").split())
        assert d.action == f"search[{query}]"
        assert decode(d.prompt_token_ids).endswith("<action>search[")


def test_the_runner_repairs_queries_only_when_told_or_greedy(tiny_policy):
    from trainers.common.policy_rollouts import PolicyRollouts

    def first_turn(temperature: float, **kwargs):
        runner = PolicyRollouts(tiny_policy, max_turns=1, constrained=True, **kwargs)
        (played,) = runner.run(
            [runner.start("test", 0, seed=0)], temperature=temperature, sampling_seed=3
        )
        return played.instruction, played.turns[0]

    _, sampled = first_turn(1.0)  # a training rollout: the written (random) query is sent
    assert sampled.action.startswith("search[") and not sampled.action_substituted
    for instruction, turn in (first_turn(0.0), first_turn(1.0, repair_queries=True)):
        # Greedy decoding, and skillrl eval's Pass@K samples, repair the query and say so.
        assert turn.action_substituted
        assert turn.action == f"search[{' '.join(instruction.split()[:12])}]"
