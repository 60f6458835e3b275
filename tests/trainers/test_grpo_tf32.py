"""``GRPOConfig.tf32``: TF32 products for the update on CUDA only, the setting restored after."""

from __future__ import annotations

import pytest
import torch
from trainer_helpers import group_episodes
from transformers import LlamaConfig, LlamaForCausalLM

from trainers.update.config import GRPOConfig
from trainers.update.grpo import GRPOTrainer, float32_matmul_precision


@pytest.fixture(autouse=True)
def _highest_precision():
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(before)


def test_tf32_is_on_by_default():
    assert GRPOConfig().tf32 is True


@pytest.mark.parametrize("tf32", [True, False])
def test_cpu_products_stay_full_float32(tf32):
    with float32_matmul_precision(torch.device("cpu"), tf32):
        assert torch.get_float32_matmul_precision() == "highest"


def test_cuda_products_use_tf32_inside_the_block_and_are_restored_after():
    # A torch.device("cuda") is only a name: no GPU is needed to check which setting it gets.
    with float32_matmul_precision(torch.device("cuda", 0), True):
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cuda.matmul.allow_tf32
    assert torch.get_float32_matmul_precision() == "highest"
    with float32_matmul_precision(torch.device("cuda"), False):
        assert torch.get_float32_matmul_precision() == "highest"


def test_setting_is_restored_when_the_block_raises():
    with pytest.raises(RuntimeError), float32_matmul_precision(torch.device("cuda"), True):
        raise RuntimeError("update failed")
    assert torch.get_float32_matmul_precision() == "highest"


def test_update_on_cpu_runs_its_forwards_in_full_float32(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            tie_word_embeddings=True,
            pad_token_id=0,
        )
    )
    trainer = GRPOTrainer(model, GRPOConfig(tf32=True), pad_token_id=0)
    seen: list[str] = []
    logprobs = trainer.forward.logprobs

    def spying(*args, **kwargs):
        seen.append(torch.get_float32_matmul_precision())
        return logprobs(*args, **kwargs)

    monkeypatch.setattr(trainer.forward, "logprobs", spying)
    episodes = group_episodes(model, [5, 6, 7], [8, 9], [10, 11])
    metrics = trainer.train_step(episodes, [[1.0], [-1.0]])
    assert trainer.device.type == "cpu" and metrics.optimizer_steps == 1
    assert seen and set(seen) == {"highest"}
