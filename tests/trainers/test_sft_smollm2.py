"""A few SFT steps on the embedded SmolLM2-135M-Instruct make the expert's actions more likely."""

from __future__ import annotations

import pytest
from test_cold_start import expert_examples

from skillrl.policies import PolicyConfig, load_policy
from trainers.sft import train_round
from trainers.sft_config import ColdStartConfig
from trainers.sft_data import prompt_conversation


@pytest.fixture(scope="module")
def smollm2_folder(tmp_path_factory):
    from skillrl.policies.model_cache import ensure_embedded_checkpoint

    # The per-user model cache (a session-wide temp folder in tests): converted once.
    return ensure_embedded_checkpoint()


@pytest.mark.slow
def test_a_few_sft_steps_raise_the_logprob_of_the_experts_actions(smollm2_folder, tmp_path):
    policy = load_policy(PolicyConfig(model=str(smollm2_folder), dtype="float32", device="cpu"))
    examples = expert_examples(policy, [0, 1], constrained=True).examples[:6]
    assert len(examples) == 6

    def logprobs():
        # Scored the way the constrained agent scores a click: the run-time conversation
        # (pre-filled prefix included) continued by the target.
        conversations = [prompt_conversation(e) for e in examples]
        rows = policy.score_continuations(conversations, [[e.target] for e in examples])
        return [row[0] for row in rows]

    before = logprobs()
    config = ColdStartConfig(
        skills=False,
        num_train_epochs=3,
        learning_rate=1e-3,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=1,
        save_steps=100,
    )
    model, result = train_round(policy.model, policy.tokenizer, examples, config, tmp_path / "t")
    policy.model = model
    after = logprobs()
    assert result.global_step == 9
    assert sum(after) > sum(before) + 1.0, (before, after)
    assert sum(a > b for a, b in zip(after, before, strict=True)) >= 5, (before, after)
