"""``GRPOConfig.torch_compile``: the compiled update takes the same step as the eager one."""

from __future__ import annotations

import copy

import pytest
import torch
from test_grpo_update import PAD, sequence_logprob, tiny_model
from trainer_helpers import group_episodes

from trainers.update.config import GRPOConfig
from trainers.update.grpo import GRPOTrainer


@pytest.mark.slow
@pytest.mark.parametrize("use_peft", [False, True])
def test_compiled_update_matches_eager(use_peft):
    prompt, good, bad = [5, 6, 7, 8, 9], [20, 21, 22], [30, 31]
    model = tiny_model()
    episodes = group_episodes(model, prompt, good, bad)
    results = {}
    for compiled in (False, True):
        config = GRPOConfig(
            learning_rate=3e-3,
            use_peft=use_peft,
            beta=0.04,  # LoRA: the reference pass runs with the adapter disabled
            per_device_train_batch_size=1,
            gradient_accumulation_steps=2,
            lora_r=4,
            torch_compile=compiled,
        )
        torch.manual_seed(0)  # LoRA's A matrices are drawn from the global generator
        trainer = GRPOTrainer(copy.deepcopy(model), config, pad_token_id=PAD)
        metrics = trainer.train_step(episodes, [[1.0], [-1.0]])
        trained = trainer.unwrapped_model
        assert not isinstance(trained, torch._dynamo.eval_frame.OptimizedModule)
        trained.eval()
        results[compiled] = (metrics, sequence_logprob(trained, prompt, good))
    (eager, eager_good), (fast, fast_good) = results[False], results[True]
    assert fast.loss == pytest.approx(eager.loss, rel=1e-4, abs=1e-6)
    assert fast.kl == pytest.approx(eager.kl, rel=1e-3, abs=1e-7)
    assert fast.grad_norm == pytest.approx(eager.grad_norm, rel=1e-4)
    assert fast_good == pytest.approx(eager_good, abs=1e-4)
    assert eager_good > sequence_logprob(model, prompt, good) + 0.05  # the step did something
