"""The CUDA paths against the CPU, on a tiny checkpoint: no vLLM, no embedded weights needed.

Each test runs the same work on the CPU and on CUDA and holds the GPU's result to the CPU's
within a stated tolerance (float32: summation order only; bf16 autocast: bf16's 8-bit mantissa).
All skip without a CUDA GPU (``tests/conftest.py``).
"""

from __future__ import annotations

import pytest
import torch
from accelerate import Accelerator
from tiny_checkpoint import write_tiny_checkpoint
from trainer_helpers import group_episodes
from transformers import AutoModelForCausalLM

from skillrl.policies import PolicyConfig, SamplingConfig, load_policy
from trainers.update.config import GRPOConfig
from trainers.update.grpo import GRPOTrainer

pytestmark = pytest.mark.gpu

FP32_RTOL = 1e-4
"""float32 on both devices (TF32 off): only the order of summation differs."""
BF16_RTOL = 3e-2
"""bf16 autocast on both devices: products rounded to 8 mantissa bits, differently per kernel."""
LOGPROB_ATOL = 1e-4
"""Per-token log-probs of a float32 policy, CPU against CUDA."""


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "model", layers=2)


def grpo_step(checkpoint, device: str, *, bf16: bool, use_peft: bool) -> dict[str, float]:
    """One GRPO step on ``device``: the gradient norm, the loss and the weights' change."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    episodes = group_episodes(model, list(range(10, 40)), [50, 51, 52, 2], [60, 61, 2])
    config = GRPOConfig(bf16=bf16, tf32=False, use_peft=use_peft, learning_rate=1e-3)
    accelerator = Accelerator(cpu=device == "cpu")
    trainer = GRPOTrainer(model, config, pad_token_id=0, accelerator=accelerator)
    metrics = trainer.train_step(episodes, [[1.0], [-1.0]])
    assert trainer.device.type == device and metrics.optimizer_steps == 1
    after = trainer.unwrapped_model
    if use_peft:
        after = after.merge_and_unload()
    change = torch.cat(
        [(v.detach().cpu() - before[k]).flatten() for k, v in after.state_dict().items()]
    )
    return {"grad_norm": metrics.grad_norm, "loss": metrics.loss, "change": change}


@pytest.mark.parametrize("use_peft", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize(("bf16", "rtol"), [(False, FP32_RTOL), (True, BF16_RTOL)])
def test_a_grpo_step_on_cuda_matches_the_cpu(checkpoint, use_peft, bf16, rtol):
    cpu = grpo_step(checkpoint, "cpu", bf16=bf16, use_peft=use_peft)
    cuda = grpo_step(checkpoint, "cuda", bf16=bf16, use_peft=use_peft)
    assert cpu["grad_norm"] > 0
    assert cuda["grad_norm"] == pytest.approx(cpu["grad_norm"], rel=rtol)
    assert cuda["loss"] == pytest.approx(cpu["loss"], rel=rtol, abs=1e-6)
    # Adam's first step moves each weight by about lr times the sign of its gradient: the
    # weights whose gradient is far from zero must move the same way on both devices.
    agree = (torch.sign(cuda["change"]) == torch.sign(cpu["change"])).float().mean()
    assert agree > 0.99


def test_tf32_moves_an_fp32_step_on_cuda_by_little(checkpoint):
    def step(tf32: bool) -> float:
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
        episodes = group_episodes(model, list(range(10, 40)), [50, 51, 52, 2], [60, 61, 2])
        trainer = GRPOTrainer(model, GRPOConfig(tf32=tf32), pad_token_id=0)
        return trainer.train_step(episodes, [[1.0], [-1.0]]).grad_norm

    assert step(True) == pytest.approx(step(False), rel=1e-2)
    assert torch.get_float32_matmul_precision() == "highest"  # restored after the update


def policy_results(checkpoint, device: str) -> tuple[list, list]:
    policy = load_policy(PolicyConfig(model=str(checkpoint), device=device, dtype="float32"))
    assert policy.model.device.type == device
    conversations = [
        [{"role": "user", "content": f"Buy item {i}, a red ball under {10 * i} dollars."}]
        for i in range(1, 5)
    ]
    generations = policy.generate(conversations, SamplingConfig(max_new_tokens=8))
    scores = policy.score_continuations(
        conversations, [["click[buy now]", "search[red ball]", "click[next >]"]] * 4
    )
    return generations, scores


def test_policy_generation_and_scoring_on_cuda_match_the_cpu(checkpoint):
    cpu_generations, cpu_scores = policy_results(checkpoint, "cpu")
    cuda_generations, cuda_scores = policy_results(checkpoint, "cuda")
    for cpu, cuda in zip(cpu_generations, cuda_generations, strict=True):
        assert cuda.prompt_token_ids == cpu.prompt_token_ids
        # Greedy: the same tokens, unless two were within rounding of each other; the first
        # token's log-prob is compared either way.
        assert cuda.logprobs[0] == pytest.approx(cpu.logprobs[0], abs=LOGPROB_ATOL)
        if cuda.completion_token_ids == cpu.completion_token_ids:
            assert cuda.logprobs == pytest.approx(cpu.logprobs, abs=LOGPROB_ATOL)
    same = sum(
        c.completion_token_ids == g.completion_token_ids
        for c, g in zip(cpu_generations, cuda_generations, strict=True)
    )
    assert same >= 3
    for cpu, cuda in zip(cpu_scores, cuda_scores, strict=True):
        assert cuda == pytest.approx(cpu, abs=LOGPROB_ATOL * 16)
