"""GRPO update throughput and peak memory: full fine-tuning vs LoRA, same run, same device.

Run: python benchmarks/bench_train_throughput.py [--model embedded|FOLDER|HUB_ID]
[--device cpu|cuda] [--bf16] [--no-tf32] [--out F.json]

Each mode runs in its own subprocess (so its peak memory is its own: the resident set on a CPU,
``torch.cuda.max_memory_allocated`` on CUDA): load SmolLM2-135M-Instruct in fp32 on ``--device``,
build ``--turns`` synthetic turns (random prompt and completion token ids, advantages +-1, rollout
log-probs recomputed so the ratio starts at 1), run one warm-up ``train_step`` and then
``--steps`` timed ones. Throughput counts every forwarded token (prompt + completion); the
baseline is full fine-tuning, and the LoRA figures are also given as ratios to it.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

from harness import (
    Stopwatch,
    add_device_options,
    device_label,
    machine_text,
    peak_memory_mib,
    peak_memory_source,
    provenance,
    resolve_device,
    run_text,
    start_device,
    write_result,
)


def rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def measure(args: argparse.Namespace) -> dict:
    import torch
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    from skillrl_core.records import EpisodeRecord, TurnRecord
    from trainers.update.config import GRPOConfig
    from trainers.update.grpo import GRPOTrainer

    torch.manual_seed(0)
    start_device(args.device, threads=args.threads, tf32=args.tf32)
    from skillrl.policies.transformers_loading import resolve_model_source

    model = AutoModelForCausalLM.from_pretrained(
        resolve_model_source(args.model), dtype=torch.float32
    )
    vocab = model.config.vocab_size
    episodes, advantages = [], []
    for i in range(args.turns):
        prompt = torch.randint(100, vocab, (args.prompt_tokens,)).tolist()
        completion = torch.randint(100, vocab, (args.completion_tokens,)).tolist()
        turn = TurnRecord(
            turn=0,
            observation=str(i),
            available_actions=[],
            action="x",
            action_valid=True,
            reward=0.0,
            prompt_token_ids=prompt,
            completion_token_ids=completion,
        )
        episodes.append(
            EpisodeRecord(
                env_id="webshop",
                goal_id=str(i),
                instruction="",
                category="",
                turns=[turn],
                group_id=f"g{i // 2}",
            )
        )
        advantages.append([1.0 if i % 2 == 0 else -1.0])
    config = GRPOConfig(
        use_peft=args.mode == "lora",
        learning_rate=1e-5,
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        bf16=args.bf16,
        tf32=args.tf32,
    )
    accelerator = Accelerator(cpu=args.device == "cpu")
    trainer = GRPOTrainer(model, config, pad_token_id=0, accelerator=accelerator)
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    before = rss_mib()
    first = trainer.train_step(episodes, advantages)  # warm-up: allocates optimizer state
    tokens, seconds = 0, 0.0
    for _ in range(args.steps):
        with Stopwatch() as clock:
            metrics = trainer.train_step(episodes, advantages)
        seconds += clock.wall
        tokens += metrics.total_tokens
    return {
        "mode": args.mode,
        "device": args.device,
        "label": device_label(args.device, bf16=args.bf16, tf32=args.tf32, threads=args.threads),
        "tokens_per_second": tokens / seconds,
        "seconds_per_step": seconds / args.steps,
        "peak_memory_mib": peak_memory_mib(args.device),
        "loss": metrics.loss,
        "first_grad_norm": first.grad_norm,
        "rss_before_update_mib": before,
        "trainable_parameters": trainable,
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
    }


def peak_of(row: dict) -> float:
    """A mode's peak memory in MiB (files written before ``--device`` named it ``peak_rss_mib``)."""
    return row["peak_memory_mib"] if "peak_memory_mib" in row else row["peak_rss_mib"]


def label_of(results: dict) -> str:
    """How the run's update ran (files written before ``--device`` ran fp32 on a CPU)."""
    row = results["modes"]["full"]
    return row["label"] if "label" in row else f"{results['args']['threads']} threads, fp32"


def report(results: dict) -> str:
    """A results file as Markdown: one GRPO step, full fine-tuning (baseline) against LoRA."""
    args = results["args"]
    full = results["modes"]["full"]
    lines = [
        run_text(results),
        "",
        f"{args['turns']} turns x ({args['prompt_tokens']} prompt + {args['completion_tokens']} "
        f"completion) tokens, batch {args['batch_size']} x accumulation {args['grad_accum']}, "
        f"{args['steps']} timed steps, {label_of(results)}.",
        "",
        f"| mode | trainable parameters | tokens/s | s/step | "
        f"{peak_memory_source(args.get('device', 'cpu'))} | vs full |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    names = {"full": "full fine-tuning (baseline)", "lora": "LoRA r=16 (q,k,v,o)"}
    for mode, name in names.items():
        row = results["modes"][mode]
        speed = row["tokens_per_second"] / full["tokens_per_second"]
        memory = peak_of(row) / peak_of(full)
        lines.append(
            f"| {name} | {row['trainable_parameters']:,} | {row['tokens_per_second']:.1f} "
            f"| {row['seconds_per_step']:.1f} | {peak_of(row):,.0f} MiB "
            f"| {speed:.2f}x speed, {memory:.2f}x memory |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default="embedded", help="embedded (default), a model folder or a hub id"
    )
    parser.add_argument("--mode", choices=["full", "lora"], default=None)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=384)
    parser.add_argument("--completion-tokens", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--grad-accum", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (CPU only)")
    add_device_options(parser)
    parser.add_argument("--out", default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()
    args.device = resolve_device(parser, args.device)
    if args.mode:
        print(json.dumps(measure(args)))
        return
    run = provenance("train_throughput")
    rows = {}
    for mode in ("full", "lora"):
        command = [sys.executable, __file__, "--mode", mode]
        for name, value in vars(args).items():
            if name in ("mode", "out"):  # the parent alone writes the results
                continue
            flag = f"--{name.replace('_', '-')}"
            if isinstance(value, bool):
                command.append(flag if value else f"--no-{name.replace('_', '-')}")
            else:
                command += [flag, str(value)]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        rows[mode] = json.loads(out.strip().splitlines()[-1])
    full = rows["full"]
    print(
        f"{args.turns} turns x ({args.prompt_tokens} prompt + {args.completion_tokens} "
        f"generated) tokens, batch {args.batch_size} x accum {args.grad_accum}, "
        f"{args.steps} timed steps, {full['label']}"
    )
    print(
        f"{'mode':6s} {'trainable':>12s} {'tokens/s':>9s} {'s/step':>7s} {'peak MiB':>13s} "
        f"{'vs full: speed':>15s} {'memory':>7s}"
    )
    for mode, r in rows.items():
        print(
            f"{mode:6s} {r['trainable_parameters']:12,d} {r['tokens_per_second']:9.1f} "
            f"{r['seconds_per_step']:7.1f} {peak_of(r):13.0f} "
            f"{r['tokens_per_second'] / full['tokens_per_second']:14.2f}x "
            f"{peak_of(r) / peak_of(full):6.2f}x"
        )
    print(f"machine at start: {machine_text(run['machine_at_start'])}")
    if args.out:
        figures = {
            "provenance": run,
            "args": vars(args),
            "modes": rows,
            "lora_vs_full": {
                "speed": rows["lora"]["tokens_per_second"] / full["tokens_per_second"],
                "memory": peak_of(rows["lora"]) / peak_of(full),
            },
        }
        write_result(args.out, figures, name="train_throughput")


if __name__ == "__main__":
    main()
