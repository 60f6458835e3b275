"""Prompt-prefix KV reuse: the cache finds the longest shared prefix, stays bounded,
forgets on weight changes, and reusing it changes no action and no log-prob.

Fast tests use a tiny random Llama (tests/trainers/tiny_checkpoint); the slow one the real
SmolLM2 on multi-turn WebShop episodes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skillrl.policies.base import SamplingConfig
from skillrl.policies.config import PolicyConfig
from skillrl.policies.kv_reuse import Hit, PrefixKVCache, assemble, weights_version
from skillrl.policies.transformers_backend import TransformersPolicy
from skillrl_core.errors import ConfigError

sys.path.insert(0, str(Path(__file__).parents[1] / "trainers"))
from tiny_checkpoint import write_tiny_checkpoint  # noqa: E402

TOL = 1e-4


def fake_layers(ids: list[int], layers: int = 2) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """KV whose every position holds its token id, so a reused slice can be checked."""
    t = torch.tensor(ids, dtype=torch.float32).view(1, -1, 1).expand(1, len(ids), 3)
    return [(t.clone(), -t.clone()) for _ in range(layers)]


def entry_bytes(n: int) -> int:
    return 2 * 2 * n * 3 * 4


@settings(max_examples=60, deadline=None)
@given(
    stored=st.lists(st.lists(st.integers(0, 3), min_size=0, max_size=12), max_size=5),
    query=st.lists(st.integers(0, 3), min_size=0, max_size=12),
    min_reuse=st.integers(1, 4),
)
def test_lookup_finds_the_longest_shared_prefix_and_leaves_the_last_token(stored, query, min_reuse):
    cache = PrefixKVCache(budget_bytes=10**9, min_reuse=min_reuse)
    for ids in stored:
        cache.store(ids, fake_layers(ids))
    hit = cache.lookup(query)
    longest = max(
        (len(os.path.commonprefix([s, query])) for s in stored if len(s) >= min_reuse),
        default=0,
    )
    expected = min(longest, len(query) - 1)
    expected = expected if expected >= min_reuse else 0
    assert hit.length == expected
    if hit.length:
        keys, values = hit.layers[1]
        assert keys[0, : hit.length, 0].tolist() == [float(t) for t in query[: hit.length]]
        assert values[0, : hit.length, 0].tolist() == [-float(t) for t in query[: hit.length]]
    else:
        assert hit.layers is None


def test_the_budget_evicts_the_least_recently_used_and_prefixes_of_newer_entries():
    a, b, c = [1] * 10, [2] * 10, [3] * 10
    cache = PrefixKVCache(budget_bytes=2 * entry_bytes(10) + entry_bytes(2), min_reuse=2)
    cache.store(a, fake_layers(a))
    cache.store(b, fake_layers(b))
    assert cache.lookup(a + [9]).length == 10  # a is now the most recently used
    cache.store(c, fake_layers(c))
    assert (cache.lookup(a + [9]).length, cache.lookup(b + [9]).length) == (10, 0)
    assert cache.bytes == 2 * entry_bytes(10) and len(cache) == 2
    # c + 2 tokens fits in the budget only because c, a prefix of it, is dropped; a stays.
    longer = c + [4, 5]
    cache.store(longer, fake_layers(longer))
    assert len(cache) == 2 and cache.lookup(longer + [6]).length == 12
    assert cache.lookup(a + [9]).length == 10
    cache.store(list(range(100)), fake_layers(list(range(100))))  # larger than the budget
    assert len(cache) == 2


def test_bad_cache_settings_are_refused_naming_the_value():
    with pytest.raises(ConfigError, match=r"prefix_cache_mb \(-1\)"):
        PolicyConfig(prefix_cache_mb=-1)
    with pytest.raises(ConfigError, match=r"min_reuse \(0\)"):
        PrefixKVCache(min_reuse=0)


def test_a_weight_change_empties_the_cache():
    model = torch.nn.Linear(2, 2)
    cache = PrefixKVCache(min_reuse=2)
    cache.check_version(weights_version(model))
    cache.store([1, 2, 3], fake_layers([1, 2, 3]))
    cache.check_version(weights_version(model))
    assert len(cache) == 1
    with torch.no_grad():
        model.weight.add_(1.0)
    cache.check_version(weights_version(model))
    assert len(cache) == 0 and cache.bytes == 0


def test_assemble_pads_before_the_prefix_and_before_the_suffix():
    hits = [Hit(3, fake_layers([7, 8, 9])), Hit(0, None), Hit(2, fake_layers([5, 6, 1]))]
    layout = assemble([[7, 8, 9, 4], [1, 2, 3], [5, 6, 4, 4, 4]], hits, pad_id=0)
    assert layout.input_ids.tolist() == [[0, 0, 4], [1, 2, 3], [4, 4, 4]]
    assert layout.attention_mask.tolist() == [
        [1, 1, 1, 0, 0, 1],
        [0, 0, 0, 1, 1, 1],
        [0, 1, 1, 1, 1, 1],
    ]
    assert layout.position_ids.tolist() == [[0, 0, 3], [0, 1, 2], [2, 3, 4]]
    keys = layout.past[0][0]
    assert keys[:, 0, :, 0].tolist() == [[7, 8, 9], [0, 0, 0], [0, 5, 6]]


@pytest.fixture(scope="module")
def tiny() -> TransformersPolicy:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = write_tiny_checkpoint(Path(os.environ.get("TMPDIR", "/tmp")) / "kv-tiny" / "model")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    # Random init leaves attention almost uniform, blind to positions and masks; sharpen it so
    # a wrong position id or a visible pad changes the log-probs well beyond the tolerance.
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(40.0)
            layer.self_attn.k_proj.weight.mul_(40.0)
    return TransformersPolicy(model, AutoTokenizer.from_pretrained(folder))


SYSTEM = "You shop. Reply with <action>...</action>, one admissible action."


def turn(task: str, step: int) -> list[dict[str, str]]:
    """A prompt laid out like the builder's: stable system and task, then per-turn parts."""
    history = "".join(f"- click[item {i}]\n" for i in range(step))
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Task: {task}\n\n{history}Observation: page {step * 7}"},
        {"role": "assistant", "content": "<action>"},
    ]


CANDIDATES = ["click[item 1]</action>", "click[back]</action>", "buy</action>", ""]


def run_turns(policy: TransformersPolicy, reuse: bool, method: str, *args) -> list:
    """Three turns of three episodes (two of them the same task: a group), one call per turn."""
    saved = policy.prefix_cache
    if not reuse:
        policy.prefix_cache = None
    elif saved is not None:
        saved.clear()
    policy.stats.reset()
    try:
        out = []
        for step in range(3):
            # Episodes drift apart as a sampled group would: the third lags one turn behind.
            convs = [turn("red shirt", step), turn("red shirt", max(step - 1, 0))]
            convs.append(turn("blue jeans under 30 dollars", step))
            if method == "score":
                out.append(policy.score_continuations_detailed(convs, [CANDIDATES] * 3))
            else:
                out.append(policy.generate(convs, *args))
        return out
    finally:
        policy.prefix_cache = saved


def test_scoring_is_the_same_with_and_without_prefix_reuse_over_turns(tiny):
    without = run_turns(tiny, False, "score")
    assert tiny.stats.reused_tokens == 0
    with_reuse = run_turns(tiny, True, "score")
    assert tiny.stats.reused_tokens > 0
    for a_turn, b_turn in zip(without, with_reuse, strict=True):
        for a_row, b_row in zip(a_turn, b_turn, strict=True):
            for a, b in zip(a_row, b_row, strict=True):
                assert (a.token_ids, a.prompt_token_ids) == (b.token_ids, b.prompt_token_ids)
                assert b.token_logprobs == pytest.approx(a.token_logprobs, abs=TOL)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_generation_is_the_same_with_and_without_prefix_reuse_over_turns(tiny, temperature):
    sampling = SamplingConfig(max_new_tokens=5, temperature=temperature, seed=3)
    without = run_turns(tiny, False, "generate", sampling)
    with_reuse = run_turns(tiny, True, "generate", sampling)
    assert tiny.stats.reused_tokens > 0
    for a_turn, b_turn in zip(without, with_reuse, strict=True):
        for a, b in zip(a_turn, b_turn, strict=True):
            assert a.completion_token_ids == b.completion_token_ids
            assert b.logprobs == pytest.approx(a.logprobs, abs=TOL)


def test_a_batch_encodes_its_shared_prefix_once(tiny):
    convs = [turn(task, 1) for task in ("red shirt", "blue jeans", "green socks")]
    prompts = [tiny.token_ids(tiny.render(c)) for c in convs]
    common = len(os.path.commonprefix(prompts))
    assert common > 40  # the system message and the start of the user message
    tiny.prefix_cache = None
    tiny.stats.reset()
    without = tiny.score_continuations_detailed(convs, [CANDIDATES] * 3)
    assert tiny.stats.prefill_tokens == sum(map(len, prompts))
    tiny.prefix_cache = PrefixKVCache()
    tiny.stats.reset()
    shared = tiny.score_continuations_detailed(convs, [CANDIDATES] * 3)
    # The prefix once, then each prompt's own rest on top of it.
    assert tiny.stats.reused_tokens == 3 * common
    assert tiny.stats.prefill_tokens == sum(map(len, prompts)) - 2 * common
    assert tiny.stats.computed_rows == 3
    for a_row, b_row in zip(without, shared, strict=True):
        for a, b in zip(a_row, b_row, strict=True):
            assert b.token_logprobs == pytest.approx(a.token_logprobs, abs=TOL)


def test_changed_weights_are_never_scored_with_a_stale_prefix(tiny):
    convs = [turn("red shirt", 2)]
    tiny.score_continuations_detailed(convs, [CANDIDATES])  # fills the cache
    original = {k: v.clone() for k, v in tiny.model.state_dict().items()}
    try:
        with torch.no_grad():
            for p in tiny.model.parameters():
                p.mul_(1.5)
        reused = tiny.score_continuations_detailed(convs, [CANDIDATES])
        tiny.prefix_cache.clear()
        fresh = tiny.score_continuations_detailed(convs, [CANDIDATES])
    finally:
        tiny.model.load_state_dict(original)
    for a, b in zip(fresh[0], reused[0], strict=True):
        assert b.token_logprobs == pytest.approx(a.token_logprobs, abs=TOL)


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [0.0, 2.0], ids=["greedy", "sampled"])
def test_real_multi_turn_rollouts_are_the_same_with_and_without_prefix_reuse(tmp_path, temperature):
    from memory import BankConfig, SkillBank
    from skillrl.agents.llm import LLMAgent, LLMAgentConfig
    from skillrl.distill.seeding import seed_bank_if_empty
    from skillrl.policies import PolicyConfig, load_policy
    from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine

    policy = load_policy(PolicyConfig(model="embedded", workspace=tmp_path, dtype="float32"))
    bank = SkillBank.open(BankConfig(workspace=tmp_path))
    seed_bank_if_empty(bank, "webshop")
    sampling = SamplingConfig(max_new_tokens=64, temperature=temperature, seed=7)
    agent = LLMAgent(policy, constrained=True, config=LLMAgentConfig(sampling=sampling))
    # A group of two episodes of goal 0 and one of goal 1: reuse within an episode across
    # turns, within the group (sampled: the siblings part after their shared first turn), and
    # of the system message shared by both goals (encoded once in the first call).
    starts = [EpisodeStart("webshop", "test", g, seed=g) for g in (0, 0, 1)]
    records, reused = {}, {}
    cache = policy.prefix_cache
    for reuse in (False, True):
        policy.prefix_cache = cache if reuse else None
        policy.stats.reset()
        engine = RolloutEngine(agent, bank=bank, config=RolloutConfig(max_turns=4, max_parallel=3))
        records[reuse] = engine.run(starts)
        reused[reuse] = policy.stats.reused_tokens
    bank.close()
    assert reused[False] == 0 and reused[True] > 0
    assert max(len(r.turns) for r in records[True]) >= 3
    if temperature:  # the siblings parted, so each reused its own turns and their shared start
        first, second = records[True][0].turns, records[True][1].turns
        assert [t.prompt_token_ids for t in first] != [t.prompt_token_ids for t in second]
    for old, new in zip(records[False], records[True], strict=True):
        assert [t.action for t in old.turns] == [t.action for t in new.turns]
        for a, b in zip(old.turns, new.turns, strict=True):
            assert a.completion_token_ids == b.completion_token_ids
            assert a.prompt_token_ids == b.prompt_token_ids
            assert b.completion_logprobs == pytest.approx(a.completion_logprobs, abs=TOL)
