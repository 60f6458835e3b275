"""bf16 training rollouts: a copy of the trained model, refreshed after every update.

Real tiny checkpoint, real LoRA trainer, real run files; only the environment's goals are few.
"""

from __future__ import annotations

import pytest
import torch
from tiny_checkpoint import write_tiny_checkpoint

from skillrl.policies import PolicyConfig
from skillrl.policies.transformers_backend import TransformersPolicy
from skillrl.policies.weight_sync import SyncedCopyPolicy, copy_weights
from skillrl_core.errors import ConfigError
from trainers.common.policy_rollouts import PolicyRollouts
from trainers.cycle.config import CycleConfig
from trainers.cycle.cycle import TrainingRun
from trainers.update.config import GRPOConfig
from trainers.update.grpo import apply_lora


def load(folder) -> TransformersPolicy:
    return TransformersPolicy.load(
        PolicyConfig(backend="transformers", model=str(folder), dtype="float32")
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "model", layers=2)


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits.float()


def test_the_copy_plays_the_merged_lora_weights_in_bf16_and_leaves_the_trainer_as_it_was(tiny):
    policy = load(tiny)
    copy = SyncedCopyPolicy.copy_of(policy, torch.bfloat16)
    assert next(copy.model.parameters()).dtype == torch.bfloat16
    assert copy.model is not policy.model
    trained = apply_lora(policy.model, GRPOConfig(lora_r=4))
    with torch.no_grad():  # a trained adapter: B is zero at init, so give it weights
        for name, param in trained.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    before = {n: p.detach().clone() for n, p in trained.named_parameters()}
    ids = [5, 9, 40, 41, 77, 3]
    stale = logits(copy.model, ids)
    assert copy.sync_weights(trained) >= 0 and copy.syncs == 1
    fresh, wanted = logits(copy.model, ids), logits(trained, ids)
    assert not torch.allclose(stale, wanted, atol=0.05)
    assert torch.allclose(fresh, wanted, atol=0.05, rtol=0.02)  # bf16 rounding only
    after = dict(trained.named_parameters())
    assert all(torch.allclose(after[n], p, atol=1e-6) for n, p in before.items())


def test_a_copy_is_made_before_the_trainer_wraps_the_model_and_must_match_it(tiny, tmp_path):
    policy = load(tiny)
    wrapped = load(tiny)
    wrapped.model = apply_lora(wrapped.model, GRPOConfig(lora_r=4))
    with pytest.raises(ConfigError, match="before the trainer wraps"):
        SyncedCopyPolicy.copy_of(wrapped, torch.bfloat16)
    other = load(write_tiny_checkpoint(tmp_path / "one-layer", layers=1))
    with pytest.raises(ConfigError, match="rollout copy has no parameter"):
        copy_weights(policy.model, other.model)
    with pytest.raises(ConfigError, match="no weights for the rollout copy"):
        copy_weights(other.model, policy.model)


CONFIG = CycleConfig(
    cycles=1,
    goals_per_cycle=1,
    group_size=2,
    eval_goals=1,
    validation_goals=0,
    max_turns=2,
    max_new_tokens=8,
    seed=1,
    max_topup_rounds=0,
    dynamic_sampling=False,
    skills=False,
    distill=False,
    evolve=False,
    rollout_dtype="bfloat16",
)


def test_a_run_rolls_out_on_the_copy_syncs_it_and_evaluates_the_float32_weights(tiny, tmp_path):
    policy = load(tiny)
    copy = SyncedCopyPolicy.copy_of(policy, torch.bfloat16)
    runner = PolicyRollouts(copy, max_turns=2, max_new_tokens=8)
    evaluator = PolicyRollouts(policy, max_turns=2, max_new_tokens=8)
    grpo = GRPOConfig(learning_rate=1e-2, per_device_train_batch_size=8, use_peft=True, lora_r=4)
    run = TrainingRun(
        CONFIG, grpo, policy=policy, runner=runner, eval_runner=evaluator, run_dir=tmp_path / "r"
    )
    state = run.run()
    assert copy.syncs == 2  # at the start and after the one update
    last = state.history[-1]
    assert last["update.sync_seconds"] >= 0
    assert last["rollout.forwarded_tokens"] > 0 and 0 < last["rollout.model_seconds"]
    assert last["rollout.model_seconds"] <= last["rollout.seconds"]
    # Training turns came from the copy, evaluation turns from the float32 weights.
    assert runner.timings.turns >= CONFIG.group_size
    assert evaluator.timings.turns >= 2  # cycle 0 and cycle 1, one goal each
    merged = {n: p for n, p in copy.model.named_parameters()}
    trained = run.trainer.unwrapped_model
    trained.merge_adapter()
    try:
        for name, value in trained.named_parameters():
            plain = name.removeprefix("base_model.model.").replace(".base_layer", "")
            if plain in merged:
                assert torch.equal(merged[plain], value.detach().to(torch.bfloat16)), plain
    finally:
        trained.unmerge_adapter()


def test_the_rollout_dtype_is_checked():
    with pytest.raises(ConfigError, match="rollout_dtype"):
        CycleConfig(rollout_dtype="float16")


def test_the_cli_refuses_a_rollout_dtype_for_a_rollout_server(tmp_path):
    from click.testing import CliRunner

    from cli import main

    result = CliRunner().invoke(
        main,
        ["train", "--workspace", str(tmp_path / "ws"), "--backend", "trl-vllm",
         "--base-url", "http://127.0.0.1:8000", "--rollout-dtype", "bfloat16"],
    )  # fmt: skip
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "--rollout-dtype is for in-process rollouts" in result.output
