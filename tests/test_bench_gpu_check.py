"""benchmarks/bench_gpu_check.py: card peaks, MFU, time-boxed steps and the rendered report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_gpu_check as check  # noqa: E402


@pytest.mark.parametrize(
    ("card", "peak"),
    [
        ("NVIDIA H200", 989.0),
        ("NVIDIA H100 80GB HBM3", 989.0),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA L40S", 362.0),
        ("NVIDIA L4", 121.0),
        ("NVIDIA A10G", 70.0),
        ("cpu", None),
        ("Tesla T4", None),
    ],
)
def test_the_bf16_peak_is_found_by_card_name(card, peak):
    assert check.bf16_peak_tflops(card) == peak


def test_mfu_is_six_n_tokens_per_second_over_the_peak():
    assert check.mfu(100_000_000, 50_000.0, 100.0) == pytest.approx(0.3)
    assert check.mfu(100_000_000, 50_000.0, None) is None


def test_the_stand_in_model_has_smollm2_135m_parameter_count():
    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig(**check.SMOLLM2_135M))
    assert sum(p.numel() for p in model.parameters()) == 134_515_008


def test_a_step_that_prints_json_is_ok_with_its_figures():
    done = check.timed("echo", ["echo", json.dumps({"a": 1})], 30, {})
    assert done.status == "ok" and done.figures == {"a": 1} and done.log == ""


def test_a_failing_step_is_logged_not_raised():
    done = check.timed("fails", ["sh", "-c", "echo broken >&2; exit 3"], 30, {})
    assert done.status == "failed" and done.figures is None and "broken" in done.log


def test_a_step_past_its_limit_is_stopped_and_marked():
    done = check.timed("sleeps", ["sleep", "30"], 1, {})
    assert done.status == "timed out" and "after 1 s" in done.log


def step(name, status="ok", figures=None, log=""):
    return {"name": name, "status": status, "seconds": 1.0, "figures": figures, "log": log}


def update(tokens_per_second: float, grad_norm: float) -> dict:
    return {
        "tokens_per_second": tokens_per_second,
        "seconds_per_step": 0.5,
        "peak_memory_mib": 4096.0,
        "parameters": 134_515_008,
        "first_grad_norm": grad_norm,
        "loss": 0.0,
    }


def test_a_cuda_report_names_the_card_mfu_the_precision_change_and_failures():
    results = {
        "provenance": {
            "command": "python -m benchmarks gpu_check",
            "commit": "abc1234",
            "started": "2026-12-04T00:00:00+00:00",
            "machine_at_start": {"matmul_gflops": 100.0, "load_average": 1.0, "cores": 16},
        },
        "small": False,
        "device": "cuda",
        "card": "NVIDIA H200",
        "bf16_peak_tflops": 989.0,
        "steps": [
            step("model", figures={"path": "m", "weights": "embedded"}),
            step("update fp32 full", figures=update(100_000.0, 2.0)),
            step("update tf32 full", figures=update(200_000.0, 2.002)),
            step("update bf16 lora", "failed", log="Traceback\nRuntimeError: CUDA out of memory"),
            step("vllm", "skipped", log="vllm is not installed"),
        ],
    }
    text = check.report(results)
    assert "CUDA, NVIDIA H200; full sizes; weights: embedded." in text
    assert "against 989 TFLOP/s dense bf16" in text
    # 6 x 134.5M x 100k tokens/s over 989 TFLOP/s = 8.2 %.
    assert "| fp32 full | 100,000 | 0.50 | 4,096 MiB | 8.2% | 2 |" in text
    assert "| tf32 full | 200,000 | 0.50 | 4,096 MiB | 16.3% | 2.002 (+1.00e-03) |" in text
    assert "| update bf16 lora | failed: RuntimeError: CUDA out of memory | 1 |" in text
    assert "| vllm | skipped: vllm is not installed | 1 |" in text
    assert "peak GPU memory" in text


def test_without_the_embedded_weights_a_random_model_of_their_shape_is_built(tmp_path, monkeypatch):
    import argparse

    from skillrl.policies import transformers_loading
    from skillrl_core.errors import ModelLoadError

    def absent(*args, **kwargs):
        raise ModelLoadError("no GGUF on this machine")

    monkeypatch.setattr(transformers_loading, "resolve_model_source", absent)
    shape = {**check.SMOLLM2_135M, "vocab_size": 300, "hidden_size": 18, "num_hidden_layers": 1}
    monkeypatch.setattr(check, "SMOLLM2_135M", shape)  # the real shape writes 540 MB
    args = argparse.Namespace(work=str(tmp_path), small=False, model="embedded")
    found = check.step_model(args)
    assert found["weights"].startswith("random, SmolLM2-135M-shaped (embedded not loadable")
    assert "no GGUF" in found["weights"]
    config = json.loads((Path(found["path"]) / "config.json").read_text())
    assert config["vocab_size"] == 300 and config["num_key_value_heads"] == 3
    assert (Path(found["path"]) / "tokenizer.json").exists()
    assert found["parameters"] > 0


def test_the_small_model_takes_the_tokenizers_vocabulary(tmp_path):
    import argparse

    found = check.step_model(argparse.Namespace(work=str(tmp_path), small=True, model="x"))
    config = json.loads((Path(found["path"]) / "config.json").read_text())
    assert config["vocab_size"] == 259 and config["num_hidden_layers"] == 2
    assert found["weights"] == "random, tiny (--small)"
