"""The policy's fast paths (shared prompts, packed candidates) give what the plain path gives.

Fast tests run a tiny random Llama with a byte-level tokenizer (tests/trainers/tiny_checkpoint);
the slow ones the real SmolLM2 on real WebShop turns.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillrl.policies.base import SamplingConfig
from skillrl.policies.prompt_sharing import dedupe, pack_candidates
from skillrl.policies.transformers_backend import TransformersPolicy

sys.path.insert(0, str(Path(__file__).parents[1] / "trainers"))
from tiny_checkpoint import write_tiny_checkpoint  # noqa: E402

TOL = 1e-4


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> TransformersPolicy:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "model")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return TransformersPolicy(model, AutoTokenizer.from_pretrained(folder))


def both(policy: TransformersPolicy, method: str, *args):
    results = []
    for fast in (False, True):
        policy.fast = fast
        results.append(getattr(policy, method)(*args))
    policy.fast = True
    return results


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "<action>"}]


@given(st.lists(st.integers(0, 4), max_size=12))
def test_dedupe_maps_every_row_to_an_equal_first_occurrence(keys):
    groups = dedupe(keys)
    assert [keys[groups.unique[j]] for j in groups.index] == keys
    assert len(set(keys[i] for i in groups.unique)) == len(groups.unique)
    assert groups.unique == sorted(groups.unique)
    assert all(groups.unique[j] <= row for row, j in enumerate(groups.index))
    assert groups.saved == len(keys) - len(set(keys))


def test_packed_mask_lets_a_candidate_see_its_prompt_and_its_own_past_only():
    prompt_mask = torch.tensor([[0, 1, 1]])
    packed = pack_candidates([[[5, 6, 7], [8], [9, 10]]], prompt_mask, torch.float32)
    allowed = packed.attention_mask[0, 0] == 0
    # Candidate 0 feeds 5, 6 (columns 0-1); [8] feeds nothing; candidate 2 feeds 9 (column 2).
    assert packed.spans == [[(0, 2), (2, 0), (2, 1)]]
    assert packed.input_ids.tolist() == [[5, 6, 9]]
    assert packed.position_ids.tolist() == [[2, 3, 2]]
    assert allowed[:, :3].tolist() == [[False, True, True]] * 3  # prompt, not its padding
    assert allowed[:, 3:].tolist() == [
        [True, False, False],
        [True, True, False],
        [False, False, True],
    ]


def test_scoring_is_the_same_with_shared_prompts_and_packed_candidates(tiny):
    convs = [user("red shirt"), user("what is 2+2?"), user("red shirt"), user("red shirt")]
    cands = [
        ["click[b01]</action>", "click[back to search]</action>", "", "a"],
        ["4</action>", "the answer is 4"],
        ["click[b01]</action>", "click[back to search]</action>", "", "a"],
        ["click[next >]</action>", "click[b01]</action>"],  # a copy with other candidates
    ]
    old, new = both(tiny, "score_continuations_detailed", convs, cands)
    for old_row, new_row in zip(old, new, strict=True):
        for a, b in zip(old_row, new_row, strict=True):
            assert (a.text, a.token_ids, a.prompt_token_ids) == (
                b.text,
                b.token_ids,
                b.prompt_token_ids,
            )
            assert b.token_logprobs == pytest.approx(a.token_logprobs, abs=TOL)
            assert b.logprob == pytest.approx(a.logprob, abs=TOL)
    assert tiny.stats.computed_rows < tiny.stats.prompt_rows


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    prompts=st.lists(st.sampled_from(["a", "bb", "task: shoes", "x y z"]), min_size=1, max_size=4),
    texts=st.lists(st.text(max_size=8), min_size=1, max_size=4),
)
def test_scoring_matches_on_any_text(tiny, prompts, texts):
    convs = [user(p) for p in prompts]
    cands = [texts for _ in prompts]
    old, new = both(tiny, "score_continuations_detailed", convs, cands)
    for old_row, new_row in zip(old, new, strict=True):
        for a, b in zip(old_row, new_row, strict=True):
            assert a.token_ids == b.token_ids
            assert b.token_logprobs == pytest.approx(a.token_logprobs, abs=TOL)


def test_greedy_generation_is_the_same_and_copies_are_separate_objects(tiny):
    convs = [user("red shirt"), user("blue jeans please"), user("red shirt")]
    sampling = SamplingConfig(max_new_tokens=6)
    old, new = both(tiny, "generate", convs, sampling)
    for a, b in zip(old, new, strict=True):
        assert (a.completion_token_ids, a.prompt_token_ids) == (
            b.completion_token_ids,
            b.prompt_token_ids,
        )
        assert b.logprobs == pytest.approx(a.logprobs, abs=TOL)
    new[0].text = "changed"
    new[0].completion_token_ids.append(-1)
    assert new[2].text != "changed" and new[2].completion_token_ids[-1] != -1


def test_sampled_copies_share_the_prompt_but_sample_independently(tiny):
    convs = [user("red shirt")] * 4 + [user("blue jeans please")]
    sampling = SamplingConfig(max_new_tokens=8, temperature=1.0, seed=11)
    old, new = both(tiny, "generate", convs, sampling)
    # Same seed, same draws: the prefilled cache changes nothing but where the prompt ran.
    for a, b in zip(old, new, strict=True):
        assert a.completion_token_ids == b.completion_token_ids
        assert b.logprobs == pytest.approx(a.logprobs, abs=TOL)
    assert len({tuple(g.completion_token_ids) for g in new[:4]}) > 1  # copies differ
    tiny.stats.reset()
    tiny.generate(convs, sampling)
    assert (tiny.stats.prompt_rows, tiny.stats.computed_rows) == (5, 2)


@pytest.mark.slow
def test_real_constrained_rollouts_choose_the_same_actions_with_the_same_logprobs(tmp_path):
    from skillrl.agents.llm import LLMAgent
    from skillrl.policies import PolicyConfig, load_policy
    from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine

    policy = load_policy(PolicyConfig(model="embedded", workspace=tmp_path, dtype="float32"))
    agent = LLMAgent(policy, constrained=True, uses_skills=False)
    starts = [EpisodeStart("webshop", "test", g, seed=g) for g in (0, 0, 1)]
    records = {}
    for fast in (False, True):
        policy.fast = fast
        engine = RolloutEngine(agent, config=RolloutConfig(max_turns=2, max_parallel=3))
        records[fast] = engine.run(starts)
    for old, new in zip(records[False], records[True], strict=True):
        assert [t.action for t in old.turns] == [t.action for t in new.turns]
        for a, b in zip(old.turns, new.turns, strict=True):
            assert a.completion_token_ids == b.completion_token_ids
            assert a.prompt_token_ids == b.prompt_token_ids
            assert b.completion_logprobs == pytest.approx(a.completion_logprobs, abs=TOL)
