"""A few SFT steps on the embedded SmolLM2-135M-Instruct make the expert's actions more likely."""

from __future__ import annotations

import pytest
from test_cold_start import expert_examples

from skillrl.policies import PolicyConfig, load_policy
from trainers.cold_start.sft import train_round
from trainers.cold_start.sft_config import ColdStartConfig
from trainers.cold_start.sft_data import prompt_conversation


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


@pytest.mark.slow
def test_an_episodes_turns_as_a_prefix_tree_give_the_rows_loss_and_gradients(
    smollm2_folder, tree_calls
):
    """An expert episode's turns: a later turn's prompt repeats the earlier ones' system message
    and task, so the tree forwards far fewer positions, with the same loss and gradients."""
    import copy

    import torch

    from trainers.cold_start.head_loss import add_head_only_lm_head
    from trainers.cold_start.sft_data import tokenize_example

    policy = load_policy(PolicyConfig(model=str(smollm2_folder), dtype="float32", device="cpu"))
    examples = expert_examples(policy, [0], constrained=True).examples[:4]
    assert len(examples) == 4
    rows = [tokenize_example(policy.tokenizer, e) for e in examples]
    width = max(len(r["input_ids"]) for r in rows)
    input_ids = torch.zeros(len(rows), width, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    labels = torch.full_like(input_ids, -100)
    for i, row in enumerate(rows):
        n = len(row["input_ids"])
        input_ids[i, :n] = torch.tensor(row["input_ids"])
        attention_mask[i, :n] = 1
        labelled = torch.tensor(row["completion_mask"], dtype=torch.bool)
        labels[i, :n][labelled] = input_ids[i, :n][labelled]

    plain, treed = copy.deepcopy(policy.model).train(), copy.deepcopy(policy.model).train()
    add_head_only_lm_head(plain)
    add_head_only_lm_head(treed, tree=True)
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    expected = plain(**batch, fused_lm_head=True)
    got = treed(**batch, fused_lm_head=True)
    expected.loss.backward()
    got.loss.backward()
    assert len(tree_calls) == 1 and tree_calls[0] < 0.8 * int(attention_mask.sum())
    assert got.loss.item() == pytest.approx(expected.loss.item(), rel=1e-4)
    torch.testing.assert_close(got.log_probs, expected.log_probs, atol=1e-4, rtol=1e-4)
    theirs = dict(plain.named_parameters())
    for name, parameter in treed.named_parameters():
        torch.testing.assert_close(parameter.grad, theirs[name].grad, atol=2e-4, rtol=1e-3)
