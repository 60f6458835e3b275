"""benchmarks/harness.py's device options: --device/--bf16/--tf32, peak memory and labels."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_speed  # noqa: E402
import bench_train_throughput  # noqa: E402
import harness  # noqa: E402


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser()
    harness.add_device_options(made)
    return made


def test_options_default_to_fp32_with_tf32_and_no_device_named():
    args = parser().parse_args([])
    assert args.device is None and args.bf16 is False and args.tf32 is True
    args = parser().parse_args(["--device", "cpu", "--bf16", "--no-tf32"])
    assert args.device == "cpu" and args.bf16 is True and args.tf32 is False


def test_an_unknown_device_is_refused():
    with pytest.raises(SystemExit):
        parser().parse_args(["--device", "tpu"])


def test_device_defaults_to_cuda_only_when_a_gpu_is_visible(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert harness.resolve_device(parser(), None) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert harness.resolve_device(parser(), None) == "cuda"


def test_cuda_without_a_gpu_is_a_parser_error_naming_the_fix(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as stopped:
        harness.resolve_device(parser(), "cuda")
    assert stopped.value.code == 2 and "--device cpu" in capsys.readouterr().err


def test_threads_are_set_on_a_cpu_and_left_alone_on_cuda(monkeypatch):
    calls: list[tuple[str, object]] = []
    monkeypatch.setattr(torch, "set_num_threads", lambda n: calls.append(("threads", n)))
    monkeypatch.setattr(
        torch, "set_float32_matmul_precision", lambda p: calls.append(("precision", p))
    )
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda: calls.append(("reset", 0)))
    harness.start_device("cpu", threads=3, tf32=True)
    assert calls == [("threads", 3)]
    calls.clear()
    harness.start_device("cuda", threads=3, tf32=True)
    assert calls == [("precision", "high"), ("reset", 0)]
    calls.clear()
    harness.start_device("cuda", threads=None, tf32=False)
    assert calls == [("precision", "highest"), ("reset", 0)]


def test_peak_memory_is_the_gpu_allocators_on_cuda_and_the_resident_set_on_a_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 3 * 2**20)
    assert harness.peak_memory_mib("cuda") == 3.0
    assert harness.peak_memory_mib("cpu") > 10  # this Python process with torch loaded
    assert harness.peak_memory_source("cuda") == "peak GPU memory"
    assert harness.peak_memory_source("cpu") == "peak RSS"


def test_labels_name_the_device_and_the_precision(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    assert (
        harness.device_label("cuda", bf16=False, tf32=True)
        == "fp32 with TF32 on CUDA (NVIDIA H200)"
    )
    assert harness.device_label("cuda", bf16=False, tf32=False) == "fp32 on CUDA (NVIDIA H200)"
    assert (
        harness.device_label("cuda", bf16=True, tf32=True) == "bf16 autocast on CUDA (NVIDIA H200)"
    )
    assert (
        harness.device_label("cpu", bf16=False, tf32=True, threads=2) == "fp32 on CPU (2 threads)"
    )
    assert (
        harness.device_label("cpu", bf16=True, tf32=False, bf16_text="bf16 weights")
        == "bf16 weights on CPU"
    )


def throughput_results(full: dict, lora: dict, **args) -> dict:
    return {
        "provenance": {
            "command": "python -m benchmarks train_throughput",
            "commit": "abc1234",
            "started": "2026-12-04T00:00:00+00:00",
            "machine_at_start": {"matmul_gflops": 100.0, "load_average": 1.0, "cores": 2},
        },
        "args": {
            "turns": 8,
            "prompt_tokens": 384,
            "completion_tokens": 32,
            "batch_size": 4,
            "grad_accum": 2,
            "steps": 2,
            "threads": 2,
            **args,
        },
        "modes": {"full": full, "lora": lora},
    }


def row(peak_key: str, peak: float, speed: float, **extra) -> dict:
    return {
        "tokens_per_second": speed,
        "seconds_per_step": 1.0,
        peak_key: peak,
        "trainable_parameters": 10,
        **extra,
    }


def test_a_cuda_throughput_file_reports_gpu_memory_and_its_label():
    label = "bf16 autocast on CUDA (NVIDIA H200)"
    text = bench_train_throughput.report(
        throughput_results(
            row("peak_memory_mib", 2000.0, 100.0, label=label),
            row("peak_memory_mib", 1000.0, 150.0, label=label),
            device="cuda",
        )
    )
    assert f"{label}." in text and "| peak GPU memory |" in text
    assert "1.50x speed, 0.50x memory" in text and "2,000 MiB" in text


def test_a_throughput_file_from_before_device_options_renders_as_it_did():
    saved = json.loads((ROOT / "docs" / "results" / "train_throughput.json").read_text())
    text = bench_train_throughput.report(saved)
    assert f"{saved['args']['threads']} threads, fp32." in text and "| peak RSS |" in text


def speed_args(*argv: str) -> argparse.Namespace:
    """bench_speed's options as main() holds them once ``--device`` is resolved."""
    args = bench_speed.build_parser().parse_args(list(argv))
    args.device = args.device or "cpu"
    return args


def test_the_speed_benchmark_takes_the_device_options_and_says_what_bf16_means_per_phase():
    args = bench_speed.build_parser().parse_args([])
    assert args.device is None and args.bf16 is False and args.tf32 is True
    assert args.threads is None  # torch's own choice unless asked: threads are a CPU setting
    args = bench_speed.build_parser().parse_args(["--device", "cuda", "--bf16", "--no-tf32"])
    assert (args.device, args.bf16, args.tf32) == ("cuda", True, False)
    help_text = " ".join(bench_speed.build_parser().format_help().split())
    for phase in ("rollouts play a bf16 copy", "bf16 autocast", "SFT ignores it"):
        assert phase in help_text


def test_speed_phase_labels_name_the_device_and_what_bf16_means_in_each(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    assert bench_speed.phase_labels(speed_args("--device", "cuda", "--bf16"), 16) == {
        "rollout": "bf16 weights on CUDA (NVIDIA H200)",
        "train": "bf16 autocast on CUDA (NVIDIA H200)",
        "sft": "fp32 with TF32 on CUDA (NVIDIA H200)",
    }
    assert bench_speed.phase_labels(speed_args("--device", "cpu"), 2) == dict.fromkeys(
        ("rollout", "train", "sft"), "fp32 on CPU (2 threads)"
    )


def test_a_cuda_speed_file_renders_its_phase_labels_and_gpu_memory(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    saved = json.loads((ROOT / "docs" / "results" / "speed.json").read_text())
    args = speed_args("--device", "cuda", "--bf16")
    del saved["sft_lora"], saved["sft_full"]  # a run with --skip sft: no SFT label
    saved |= {
        "args": {**saved["args"], **vars(args)},
        "labels": bench_speed.phase_labels(args, 16),
        "peak_memory_mib": 2048.0,
    }
    text = bench_speed.report(saved)
    assert (
        "SmolLM2-135M: rollouts bf16 weights on CUDA (NVIDIA H200), GRPO update bf16 autocast "
        "on CUDA (NVIDIA H200); CPU matmul" in text
    )
    assert "peak GPU memory 2,048 MiB." in text and "SFT" not in text.split("|")[0]


def test_a_speed_file_from_before_device_options_renders_as_it_did():
    saved = json.loads((ROOT / "docs" / "results" / "speed.json").read_text())
    text = bench_speed.report(saved)
    assert f"SmolLM2-135M fp32, {saved['threads']} threads; matmul " in text
    assert "peak" not in text
