from __future__ import annotations

import copy

import pytest
import torch
from trainer_helpers import group_episodes
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from skillrl_core.errors import CheckpointError, ConfigError
from trainers.common.checkpoint import load_trainer_state, save_checkpoint, save_trainer_state
from trainers.update.batching import TurnSample, collate
from trainers.update.config import GRPOConfig
from trainers.update.grpo import GRPOTrainer
from trainers.update.microbatch_loss import completion_positions, compute_logprobs, compute_loss

PAD = 0


def tiny_model(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        pad_token_id=PAD,
    )
    return LlamaForCausalLM(config).eval()


def sequence_logprob(model, prompt: list[int], completion: list[int]) -> float:
    batch = collate([TurnSample(prompt, completion, None, 0.0)], PAD)
    with torch.no_grad():
        return float(compute_logprobs(model, batch).sum())


def test_logprobs_of_left_padded_batch_match_unpadded_forward():
    model = tiny_model()
    samples = [
        TurnSample([5, 6, 7, 8, 9], [10, 11], None, 1.0),
        TurnSample([12, 13], [14, 15, 16, 17], None, -1.0),
    ]
    batch = collate(samples, PAD)
    with torch.no_grad():
        got = compute_logprobs(model, batch)
        for row, sample in enumerate(samples):
            ids = torch.tensor([sample.prompt_ids + sample.completion_ids])
            logits = model(input_ids=ids).logits[0].log_softmax(-1)
            n = len(sample.completion_ids)
            expected = [
                logits[len(sample.prompt_ids) - 1 + k, tok].item()
                for k, tok in enumerate(sample.completion_ids)
            ]
            assert got[row, -n:].tolist() == pytest.approx(expected, abs=1e-5)
    assert batch.completion_mask.tolist() == [[0, 0, 1, 1], [1, 1, 1, 1]]


def test_only_generated_tokens_move_the_loss():
    model = tiny_model()
    samples = [
        TurnSample([5, 6, 7, 8, 9, 3, 4], [10, 11], [-4.0, -4.0], 1.0),
        TurnSample([12, 13], [14, 15, 16, 17], [-4.0] * 4, -0.5),
    ]
    batch = collate(samples, PAD)
    config = GRPOConfig(beta=0.0)

    def loss_with_noise(where: torch.Tensor) -> float:
        # Noise on the final hidden states (what the LM head reads) at the positions ``where``.
        def hook(_module, _inputs, output):
            return output + torch.randn_like(output) * 5 * where.unsqueeze(-1)

        handle = model.model.norm.register_forward_hook(hook)
        try:
            with torch.no_grad():
                return compute_loss(model, batch, config)[0].loss.item()
        finally:
            handle.remove()

    predicting = completion_positions(batch)
    # Positions 6 and 7 of row 0 predict its completion [10, 11] (its last two tokens).
    assert predicting[0].nonzero().flatten().tolist() == [6, 7]
    assert predicting[1].nonzero().flatten().tolist() == [4, 5, 6, 7]
    base = loss_with_noise(torch.zeros(predicting.shape))
    # Hidden states that predict prompt / observation / padding tokens: the loss must not move.
    outside = loss_with_noise((~predicting).float())
    assert outside == pytest.approx(base, abs=1e-6)
    # Those that predict generated tokens: it must.
    assert loss_with_noise(predicting.float()) != pytest.approx(base, abs=1e-3)


@pytest.mark.parametrize("use_peft", [False, True])
def test_one_update_raises_the_logprob_of_the_rewarded_action(use_peft):
    model = tiny_model()
    prompt, good, bad = [5, 6, 7, 8], [20, 21, 22], [30, 31, 32]
    episodes = group_episodes(model, prompt, good, bad)
    before_good = sequence_logprob(model, prompt, good)
    before_bad = sequence_logprob(model, prompt, bad)
    base_before = model.model.layers[0].self_attn.q_proj.weight.detach().clone()
    config = GRPOConfig(
        learning_rate=3e-3,
        use_peft=use_peft,
        per_device_train_batch_size=1,
        gradient_accumulation_steps=2,
        lora_r=4,
    )
    trainer = GRPOTrainer(model, config, pad_token_id=PAD)
    metrics = trainer.train_step(episodes, [[1.0], [-1.0]])
    assert metrics.samples == 2 and metrics.optimizer_steps == 1
    assert metrics.completion_tokens == 6
    assert metrics.logprob_gap_mean == pytest.approx(0.0, abs=1e-5)
    trained = trainer.unwrapped_model
    trained.eval()
    assert sequence_logprob(trained, prompt, good) > before_good + 0.05
    assert sequence_logprob(trained, prompt, bad) < before_bad - 0.05
    base_after = (
        model.model.layers[0].self_attn.q_proj.base_layer.weight
        if use_peft
        else model.model.layers[0].self_attn.q_proj.weight
    )
    changed = not torch.equal(base_before, base_after.detach())
    # Full fine-tuning moves the weights; LoRA leaves the base frozen and trains the adapter.
    assert changed is (not use_peft)


def test_the_turn_counter_runs_inside_each_step_over_every_pass():
    model = tiny_model()
    episodes = group_episodes(model, [5, 6], [20, 21], [30, 31])
    config = GRPOConfig(
        learning_rate=1e-3,
        per_device_train_batch_size=1,
        gradient_accumulation_steps=2,
        num_iterations=2,
    )
    trainer = GRPOTrainer(model, config, pad_token_id=PAD)
    seen = []
    trainer.on_turns = lambda done, total: seen.append(("turns", done, total))
    trainer.on_progress = lambda done, total: seen.append(("steps", done, total))
    trainer.train_step(episodes, [[1.0], [-1.0]])
    # Two turns a pass, two passes, one turn a micro-batch: the counter moves inside each step.
    assert seen == [
        ("turns", 1, 4), ("turns", 2, 4), ("steps", 1, 2),
        ("turns", 3, 4), ("turns", 4, 4), ("steps", 2, 2),
    ]  # fmt: skip
    seen.clear()
    trainer.train_step(episodes, [[1.0], [-1.0]])
    assert seen[0] == ("turns", 1, 4)  # a new update counts from the start


def test_zero_advantage_turns_are_skipped_and_the_gap_is_reported():
    model = tiny_model()
    episodes = group_episodes(model, [5, 6], [20, 21], [30, 31], old_shift=0.3)
    trainer = GRPOTrainer(model, GRPOConfig(learning_rate=1e-3), pad_token_id=PAD)
    assert trainer.train_step(episodes, [[0.0], [0.0]]).samples == 0
    metrics = trainer.train_step(episodes, [[1.0], [-1.0]])
    assert metrics.logprob_gap_mean == pytest.approx(0.3, abs=1e-4)
    assert metrics.tokens_per_second > 0


def test_substituted_turns_are_counted_and_never_trained_on():
    model = tiny_model()
    episodes = group_episodes(model, [5, 6], [20, 21], [30, 31])
    episodes[0].turns[0].action_substituted = True  # the rewarded turn did not write its action
    trainer = GRPOTrainer(model, GRPOConfig(learning_rate=1e-3), pad_token_id=PAD)
    metrics = trainer.train_step(episodes, [[1.0], [-1.0]])
    assert metrics.samples == 1 and metrics.substituted_turns == 1
    assert metrics.completion_tokens == 2  # only the honest turn's tokens
    episodes[1].turns[0].action_substituted = True
    before = copy.deepcopy(trainer.unwrapped_model.state_dict())
    metrics = trainer.train_step(episodes, [[1.0], [-1.0]])
    assert metrics.samples == 0 and metrics.substituted_turns == 2
    after = trainer.unwrapped_model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_kl_to_the_reference_is_reported_when_beta_is_positive():
    model = tiny_model()
    episodes = group_episodes(model, [5, 6], [20, 21], [30, 31])
    config = GRPOConfig(
        learning_rate=1e-2,
        beta=0.1,
        num_iterations=2,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=1,
    )
    metrics = GRPOTrainer(model, config, pad_token_id=PAD).train_step(episodes, [[1.0], [-1.0]])
    assert metrics.optimizer_steps == 2
    assert metrics.kl > 0  # the second pass runs on moved weights


@pytest.mark.parametrize("use_peft", [False, True])
def test_checkpoint_loads_with_from_pretrained(tmp_path, use_peft):
    model = tiny_model()
    trainer = GRPOTrainer(
        model, GRPOConfig(use_peft=use_peft, lora_r=4, learning_rate=1e-2), pad_token_id=PAD
    )
    trainer.train_step(group_episodes(model, [5, 6], [20, 21], [30, 31]), [[1.0], [-1.0]])
    path = save_checkpoint(trainer.unwrapped_model, None, tmp_path / "ckpt")
    assert (path / "model.safetensors").exists()
    assert not list(tmp_path.glob(".ckpt*"))
    loaded = AutoModelForCausalLM.from_pretrained(path).eval()
    ids = torch.tensor([[5, 6, 20, 21]])
    with torch.no_grad():
        trainer.unwrapped_model.eval()
        expected = trainer.unwrapped_model(input_ids=ids).logits
        assert torch.allclose(loaded(input_ids=ids).logits, expected, atol=1e-5)


def test_a_lora_checkpoint_is_its_adapter_over_the_named_base_and_loads_as_trained(tmp_path):
    import json

    from tiny_checkpoint import write_tiny_checkpoint

    from skillrl.policies.transformers_loading import load_causal_lm

    base = write_tiny_checkpoint(tmp_path / "base")
    ids = torch.tensor([[5, 6, 20, 21]])
    folder = str(base)
    for round_ in range(2):  # the second adapter is trained over the first: a chain of two
        _, model = load_causal_lm(folder, torch.float32)
        trainer = GRPOTrainer(
            model, GRPOConfig(use_peft=True, lora_r=4, learning_rate=1e-2), pad_token_id=PAD
        )
        trainer.train_step(group_episodes(model, [5, 6], [20, 21], [30, 31]), [[1.0], [-1.0]])
        path = save_checkpoint(
            trainer.unwrapped_model, None, tmp_path / f"ckpt-{round_}", adapter_over=folder
        )
        assert (path / "adapter_model.safetensors").exists()
        assert not (path / "model.safetensors").exists()  # the adapter alone, not the model
        config = json.loads((path / "adapter_config.json").read_text())
        assert config["base_model_name_or_path"] == folder
        _, loaded = load_causal_lm(str(path), torch.float32)
        with torch.no_grad():
            trainer.unwrapped_model.eval()
            expected = trainer.unwrapped_model(input_ids=ids).logits
            assert torch.allclose(loaded.eval()(input_ids=ids).logits, expected, atol=1e-5)
        folder = str(path)
    # The second adapter records the first one's weights: once they change (a newer package's
    # shipped adapter in its place), loading the second onto them is refused, naming both.
    from safetensors.torch import load_file, save_file

    from skillrl.policies.model_settings import BASE_ADAPTER_FILE
    from skillrl_core.errors import ModelLoadError

    assert (tmp_path / "ckpt-1" / BASE_ADAPTER_FILE).exists()
    assert not (tmp_path / "ckpt-0" / BASE_ADAPTER_FILE).exists()  # its base is a whole model
    weights = tmp_path / "ckpt-0" / "adapter_model.safetensors"
    changed = {k: v + 0.5 for k, v in load_file(str(weights)).items()}
    save_file(changed, str(weights))
    with pytest.raises(ModelLoadError, match="ckpt-1 was trained over the adapter .*ckpt-0"):
        load_causal_lm(folder, torch.float32)
    load_causal_lm(str(tmp_path / "ckpt-0"), torch.float32)  # the changed one itself still loads


def test_trainer_state_round_trip_continues_the_same_optimisation(tmp_path):
    episodes = group_episodes(tiny_model(), [5, 6], [20, 21], [30, 31])
    config = GRPOConfig(learning_rate=1e-2)
    first = GRPOTrainer(tiny_model(), config, pad_token_id=PAD, seed=1)
    first.train_step(episodes, [[1.0], [-1.0]])
    save_trainer_state(first.unwrapped_model, first.optimizer, tmp_path / "state")
    second = GRPOTrainer(tiny_model(), config, pad_token_id=PAD, seed=1)
    load_trainer_state(second.unwrapped_model, second.optimizer, tmp_path / "state")
    second.generator = copy.deepcopy(first.generator)
    first.train_step(episodes, [[1.0], [-1.0]])
    second.train_step(episodes, [[1.0], [-1.0]])
    for (_, a), (_, b) in zip(
        first.unwrapped_model.named_parameters(),
        second.unwrapped_model.named_parameters(),
        strict=True,
    ):
        assert torch.allclose(a, b, atol=1e-6)
    lora = GRPOTrainer(tiny_model(), GRPOConfig(use_peft=True, lora_r=4), pad_token_id=PAD)
    with pytest.raises(CheckpointError, match="does not fit"):
        load_trainer_state(lora.unwrapped_model, lora.optimizer, tmp_path / "state")
    with pytest.raises(CheckpointError, match="missing or corrupt"):
        load_trainer_state(lora.unwrapped_model, lora.optimizer, tmp_path / "nothing")


def test_each_iteration_recomputes_the_ratio_against_log_probs_fixed_at_rollout():
    model = tiny_model()
    episodes = group_episodes(model, [5, 6], [20, 21], [30, 31])
    rollout = [list(e.turns[0].completion_logprobs) for e in episodes]
    ratios = []

    def config(iterations: int) -> GRPOConfig:
        return GRPOConfig(
            learning_rate=5e-2,
            num_iterations=iterations,
            per_device_train_batch_size=2,
            gradient_accumulation_steps=1,
        )

    one = GRPOTrainer(tiny_model(), config(1), pad_token_id=PAD).train_step(
        copy.deepcopy(episodes), [[1.0], [-1.0]]
    )
    trainer = GRPOTrainer(model, config(3), pad_token_id=PAD)
    original = trainer.accumulate_gradients

    def spy(batches, shares, step, gaps):
        outs = original(batches, shares, step, gaps)
        ratios.append(sum(o.ratio_mean for o in outs) / len(outs))
        return outs

    trainer.accumulate_gradients = spy
    three = trainer.train_step(episodes, [[1.0], [-1.0]])
    assert three.optimizer_steps == 3 and one.optimizer_steps == 1
    assert ratios[0] == pytest.approx(1.0, abs=1e-5)  # pass 1: pi_theta is pi_old
    assert abs(ratios[1] - 1.0) > 1e-4 and ratios[2] != ratios[1]  # moved weights, same pi_old
    assert [list(e.turns[0].completion_logprobs) for e in episodes] == rollout


def test_rft_trains_only_the_successful_turns_with_the_tokens_the_learner_produced():
    from trainers.update.advantages import compute_advantages
    from trainers.update.batching import build_samples

    model = tiny_model()
    episodes = group_episodes(model, [5, 6], [20, 21], [30, 31])  # one won, one lost
    advantages = compute_advantages(
        episodes, [[1.0], [0.0]], gamma=1.0, step_weight=1.0, estimator="rft"
    ).advantages
    samples = build_samples(episodes, advantages)
    assert [(s.completion_ids, s.advantage) for s in samples] == [([20, 21], 1.0)]
    before = sequence_logprob(model, [5, 6], [20, 21])
    lost_before = sequence_logprob(model, [5, 6], [30, 31])
    trainer = GRPOTrainer(model, GRPOConfig(learning_rate=5e-2, estimator="rft"), pad_token_id=PAD)
    metrics = trainer.train_step(episodes, advantages)
    assert metrics.samples == 1 and metrics.completion_tokens == 2
    trained = trainer.unwrapped_model.eval()
    assert sequence_logprob(trained, [5, 6], [20, 21]) > before
    assert sequence_logprob(trained, [5, 6], [30, 31]) != lost_before  # shared weights move


@pytest.mark.parametrize("share_prefix", [False, True])
def test_a_bf16_update_computes_in_bf16_and_keeps_float32_weights_and_direction(share_prefix):
    prompt, good, bad = [5, 6, 7, 8], [20, 21, 22], [30, 31, 32]
    updates = {}
    for bf16 in (False, True):
        model = tiny_model()
        episodes = group_episodes(model, prompt, good, bad)
        before_good = sequence_logprob(model, prompt, good)
        config = GRPOConfig(
            learning_rate=3e-3,
            use_peft=True,
            lora_r=4,
            per_device_train_batch_size=2,
            bf16=bf16,
            share_prompt_prefix=share_prefix,
        )
        trainer = GRPOTrainer(model, config, pad_token_id=PAD)
        trained = trainer.unwrapped_model
        start = {n: p.detach().clone() for n, p in trained.named_parameters() if p.requires_grad}
        metrics = trainer.train_step(episodes, [[1.0], [-1.0]])
        assert metrics.optimizer_steps == 1
        # Rollout log-probs were float32: only bf16 rounding separates the recomputed ones.
        assert (metrics.logprob_gap_mean > 1e-4) is bf16
        assert metrics.logprob_gap_mean < 0.05
        params = {n: p for n, p in trained.named_parameters() if p.requires_grad}
        assert all(p.dtype == torch.float32 for p in params.values())
        updates[bf16] = torch.cat([(params[n] - start[n]).flatten() for n in sorted(start)])
        assert sequence_logprob(trained.eval(), prompt, good) > before_good + 0.02
    cosine = torch.nn.functional.cosine_similarity(updates[False], updates[True], dim=0)
    assert cosine > 0.9


@pytest.mark.parametrize("share_prefix", [False, True])
def test_a_bf16_lora_update_casts_the_frozen_weights_once_with_the_same_result(
    share_prefix, monkeypatch
):
    import contextlib

    from trainers.update import grpo

    prompt, good, bad = [5, 6, 7, 8], [20, 21, 22], [30, 31, 32]
    trained_params, seen_dtypes = {}, {}
    for cast_once in (False, True):
        if not cast_once:  # as before: autocast casts every frozen weight at every use
            monkeypatch.setattr(grpo, "frozen_weights_in", lambda *_: contextlib.nullcontext())
        else:
            monkeypatch.undo()
        model = tiny_model()
        episodes = group_episodes(model, prompt, good, bad)
        config = GRPOConfig(
            learning_rate=3e-3,
            use_peft=True,
            lora_r=4,
            bf16=True,
            per_device_train_batch_size=2,
            share_prompt_prefix=share_prefix,
        )
        trainer = GRPOTrainer(model, config, pad_token_id=PAD)
        trained = trainer.unwrapped_model
        frozen = {n: p for n, p in trained.named_parameters() if not p.requires_grad}
        kept = {n: p.detach().clone() for n, p in frozen.items()}
        dtypes = seen_dtypes.setdefault(cast_once, set())
        hooks = [
            m.register_forward_pre_hook(lambda m, _, seen=dtypes: seen.add(m.weight.dtype))
            for m in trained.modules()
            if isinstance(m, torch.nn.Linear) and not m.weight.requires_grad
        ]
        trainer.train_step(episodes, [[1.0], [-1.0]])
        for hook in hooks:
            hook.remove()
        # The float32 weights are back in place, the same tensors, unchanged.
        after = {n: p for n, p in trained.named_parameters() if not p.requires_grad}
        assert all(after[n] is frozen[n] and torch.equal(after[n], kept[n]) for n in kept)
        trained_params[cast_once] = {
            n: p.detach().clone() for n, p in trained.named_parameters() if p.requires_grad
        }
    assert seen_dtypes == {False: {torch.float32}, True: {torch.bfloat16}}
    # The same bf16 products either way: the LoRA weights train to the same values.
    assert all(torch.equal(trained_params[False][n], p) for n, p in trained_params[True].items())


def test_frozen_weights_in_leaves_trainable_and_non_float32_weights_alone():
    from trainers.update.grpo import frozen_weights_in

    trainable, frozen_half = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2).to(torch.bfloat16)
    frozen_half.weight.requires_grad_(False)
    model = torch.nn.Sequential(trainable, frozen_half)
    with frozen_weights_in(model, torch.bfloat16):
        assert trainable.weight.dtype == torch.float32 and trainable.weight.requires_grad
        assert frozen_half.weight.dtype == torch.bfloat16
    with frozen_weights_in(model, None):
        assert trainable.weight.dtype == torch.float32


def test_a_lora_update_on_the_top_layers_trains_only_them_and_still_learns():
    model = tiny_model()
    prompt, good, bad = [5, 6, 7, 8], [20, 21, 22], [30, 31, 32]
    episodes = group_episodes(model, prompt, good, bad)
    before_good = sequence_logprob(model, prompt, good)
    config = GRPOConfig(learning_rate=3e-3, use_peft=True, lora_r=4, lora_layers=1)
    trainer = GRPOTrainer(model, config, pad_token_id=PAD)
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all(".layers.1." in n and "lora_" in n for n in trainable)
    trainer.train_step(episodes, [[1.0], [-1.0]])
    trained = trainer.unwrapped_model
    trained.eval()
    assert sequence_logprob(trained, prompt, good) > before_good + 0.02
    with pytest.raises(ConfigError, match="exceeds the model's 2 decoder layers"):
        GRPOTrainer(tiny_model(), GRPOConfig(use_peft=True, lora_layers=3), pad_token_id=PAD)
    with pytest.raises(ConfigError, match="--full trains every layer"):
        GRPOConfig(use_peft=False, lora_layers=1)
