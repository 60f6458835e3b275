"""Training episodes per hour at a recipe's settings: float32 (the baseline) against bf16 levers.

    python -m benchmarks train_speed --config configs/webshop-rft.yaml --goals-per-cycle 16 \\
        --rounds 2 --out out/train_speed.json

Each arm is one ``skillrl train --config FILE --cycles 1 --eval-goals 1 --test-goals 0`` (no test
goals, no replay with the cycle-0 bank) in a fresh workspace, in its own process, with the arm's
flags added: every other setting is the recipe's (model,
estimator, decoding, group size, turn limit, prompt budget, LoRA, learning rate, validation goals
that evolve the bank). Cycle 1 is one whole improvement cycle (rollout, distill, update, a
one-goal evaluation, evolve, save); its wall time is what an hour of training is made of, so
training episodes per hour = cycle-1 episodes / cycle-1 seconds. Arms:

  float32          today's run: rollouts and update in float32 (the baseline)
  bf16 rollouts    ``--rollout-dtype bfloat16``
  bf16 everywhere  ``--rollout-dtype bfloat16 --bf16`` (the update's forwards in bf16 autocast,
                   the frozen LoRA base weights cast to bf16 once per update)
  bf16 everywhere, 64 at once  the same with ``--rollout-parallel 64`` (four times the
                   episodes in each batched generation)
  bf16 rollouts, 64 at once    bf16 rollouts, 64 episodes at once, a float32 update
  ..., LoRA on the top 10 layers  the same with ``--lora-layers 10``: the update's LoRA adapts
                   only the top 10 of the 30 decoder layers, so its backward pass stops there
  float32, 64 at once (, LoRA on the top 10 layers)  the same levers with float32 rollouts: the
                   recipe's own on a machine without native bf16 (``--rollout-dtype auto``)

With ``--rounds 2`` the arms run A B C C B A, so load drift hits them alike. Every arm plays the
same training goals from the same seed; sampled episodes differ by rounding, so the figures are
per episode and per turn.

The rollout phase's compute rate: 2 x (the decoder blocks' linear weights) FLOPs per token its
forward passes computed (prompt tokens not taken from the prefix cache, candidate and generated
tokens), over the seconds spent in them. Attention scores and the LM head are left out, so the
rate is a lower bound. It is set against the machine's 1024 x 1024 matmul rate in fp32 and in
bf16, measured before every arm with the load average.

The update's compute rate, likewise: per position its passes forwarded (each prefix a tree shares
once, ``StepMetrics.forwarded_positions``), 2 x the linear weights forward plus 2 x the linear
weights of the blocks its backward crosses (all of them, or ``--lora-layers``' top N), over the
update seconds. LoRA's own weight gradients, attention scores and the LM head are left out: a
lower bound too. With both counts, each arm also gets the cycle it would take if those products
ran at the matmul rate and everything else as measured: how fast the same work can go here.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import (
    machine,
    machine_text,
    matmul_gflops,
    portable_arguments,
    provenance,
    run_text,
    waiting_parent,
    write_result,
)

ARMS: dict[str, list[str]] = {
    "float32": ["--rollout-dtype", "float32", "--no-bf16"],
    "bf16 rollouts": ["--rollout-dtype", "bfloat16", "--no-bf16"],
    "bf16 everywhere": ["--rollout-dtype", "bfloat16", "--bf16"],
    "bf16 everywhere, 64 at once": [
        "--rollout-dtype",
        "bfloat16",
        "--bf16",
        "--rollout-parallel",
        "64",
    ],
    "bf16 rollouts, 64 at once": [
        "--rollout-dtype",
        "bfloat16",
        "--no-bf16",
        "--rollout-parallel",
        "64",
    ],
    "float32, 64 at once": ["--rollout-dtype", "float32", "--no-bf16", "--rollout-parallel", "64"],
    "float32, 64 at once, LoRA on the top 10 layers": [
        "--rollout-dtype",
        "float32",
        "--no-bf16",
        "--rollout-parallel",
        "64",
        "--lora-layers",
        "10",
    ],
    "bf16 rollouts, 64 at once, LoRA on the top 10 layers": [
        "--rollout-dtype",
        "bfloat16",
        "--no-bf16",
        "--rollout-parallel",
        "64",
        "--lora-layers",
        "10",
    ],
}


def model_shape(config: str) -> tuple[int, int]:
    """The recipe model's decoder-block linear weights (embeddings and norms excluded), and its
    number of decoder blocks."""
    import torch
    import yaml

    from skillrl.policies.model_settings import shipped_adapter
    from skillrl.policies.transformers_loading import load_causal_lm

    recipe = yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}
    model = str(recipe.get("model", "embedded"))
    if model == "shipped":
        model = str(shipped_adapter(str(recipe.get("env", "webshop"))))
    _, loaded = load_causal_lm(model, torch.float32)
    weights = sum(
        p.numel() for name, p in loaded.named_parameters() if ".layers." in name and p.dim() == 2
    )
    return weights, int(loaded.config.num_hidden_layers)


def backward_layers(flags: list[str], layers: int) -> int:
    """The decoder blocks an arm's update backpropagates through: ``--lora-layers N``'s top N,
    else all of them."""
    if "--lora-layers" in flags:
        return int(flags[flags.index("--lora-layers") + 1])
    return layers


def update_flops(row: dict[str, Any], linear_weights: int, layers: int) -> float:
    """The update's linear-layer FLOPs: per forwarded position, 2 x the weights forward and 2 x
    the crossed blocks' weights backward (input gradients; LoRA's own weight gradients and the
    attention scores are left out, so rates made from it are lower bounds)."""
    crossed = linear_weights * backward_layers(row["flags"], layers) / layers
    return (2 * linear_weights + 2 * crossed) * row["update_forwarded_positions"]


def update_gflops(row: dict[str, Any], linear_weights: int, layers: int) -> float:
    """The update's linear-layer compute rate (:func:`update_flops` over the update seconds)."""
    if row["update_seconds"] <= 0:
        return 0.0
    return update_flops(row, linear_weights, layers) / row["update_seconds"] / 1e9


def run_arm(arm: str, round_index: int, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Run one arm's single-cycle training run; return its cycle-1 figures."""
    from trainers.cycle.cycle_metrics import CycleMetrics
    from trainers.update.grpo import StepMetrics

    workspace = root / f"{arm.replace(' ', '-')}-{round_index}"
    before = machine()
    before["bf16_matmul_gflops"] = round(matmul_gflops(dtype="bfloat16"), 1)
    command = [
        sys.executable, "-m", "cli", "train", "--config", args.config,
        "--workspace", str(workspace), "--run-name", "speed", "--cycles", "1",
        "--eval-goals", "1", "--test-goals", "0", "--no-compare-starting-bank",
        "--goals-per-cycle", str(args.goals_per_cycle),
        *(["--threads", str(args.threads)] if args.threads else []), *ARMS[arm],
    ]  # fmt: skip
    print(f"{arm} (round {round_index}): {machine_text(before)}", flush=True)
    started = time.perf_counter()
    subprocess.run(command, check=True, env=getattr(args, "child_environment", None))
    wall = time.perf_counter() - started
    metrics = workspace / "runs" / "speed" / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
    cycle = CycleMetrics.from_row(next(r for r in rows if r["cycle"] == 1))
    train, rollout = cycle.train, cycle.rollout
    step = cycle.update.step if cycle.update else StepMetrics()  # no group kept: no update
    episodes = int(train.episodes)
    seconds = float(cycle.seconds)
    flops = 2 * args.linear_weights * int(rollout.forwarded_tokens)
    model_seconds = float(rollout.model_seconds)
    rate = flops / model_seconds / 1e9 if model_seconds > 0 else 0.0
    row = {
        "arm": arm,
        "round": round_index,
        "flags": ARMS[arm],
        "episodes": episodes,
        "turns": round(episodes * float(train.mean_turns), 1),
        "training_success": train.success_rate,
        "cycle_seconds": seconds,
        "rollout_seconds": rollout.seconds,
        "update_seconds": step.seconds,
        "episodes_per_hour": episodes / seconds * 3600,
        "rollout_model_seconds": model_seconds,
        "rollout_forwarded_tokens": rollout.forwarded_tokens,
        "rollout_gflops": rate,
        "update_tokens_per_second": step.tokens_per_second,
        "update_forwarded_positions": step.forwarded_positions,
        "update_samples": step.samples,
        "logprob_gap_mean": step.logprob_gap_mean,
        "ratio_mean": step.ratio_mean,
        "clip_high_fraction": step.clip_high_fraction,
        "process_seconds": wall,
        "machine": before,
    }
    row["update_gflops"] = update_gflops(row, args.linear_weights, args.decoder_layers)
    row["seconds_at_matmul_rate"] = seconds_at_matmul_rate(
        row, args.linear_weights, args.decoder_layers
    )
    print(
        f"  {episodes} episodes in {seconds:.0f} s (rollout {row['rollout_seconds']:.0f} s, "
        f"update {row['update_seconds']:.0f} s): {row['episodes_per_hour']:.0f} episodes/hour; "
        f"rollout compute {rate:.0f} GFLOP/s",
        flush=True,
    )
    return row


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per arm: summed episodes over summed cycle seconds, and the ratio to the first arm."""
    arms: list[dict[str, Any]] = []
    for arm in ARMS:
        mine = [r for r in rows if r["arm"] == arm]
        if not mine:
            continue

        def total(key: str, mine: list[dict[str, Any]] = mine) -> float:
            return sum(float(r[key]) for r in mine)

        matmul = [r["machine"]["matmul_gflops"] for r in mine]
        bf16 = [r["machine"]["bf16_matmul_gflops"] for r in mine]
        arms.append(
            {
                "arm": arm,
                "runs": len(mine),
                "episodes": int(total("episodes")),
                "turns": total("turns"),
                "cycle_seconds": total("cycle_seconds"),
                "rollout_seconds": total("rollout_seconds"),
                "update_seconds": total("update_seconds"),
                "episodes_per_hour": total("episodes") / total("cycle_seconds") * 3600,
                "turns_per_hour": total("turns") / total("cycle_seconds") * 3600,
                "rollout_episodes_per_hour": total("episodes") / total("rollout_seconds") * 3600,
                "update_tokens_per_second": total("update_tokens_per_second") / len(mine),
                "rollout_gflops": total("rollout_gflops") / len(mine),
                "update_gflops": sum(r.get("update_gflops", 0.0) for r in mine) / len(mine),
                "seconds_at_matmul_rate": sum(r.get("seconds_at_matmul_rate", 0.0) for r in mine),
                "matmul_gflops": sum(matmul) / len(matmul),
                "bf16_matmul_gflops": sum(bf16) / len(bf16),
                "logprob_gap_mean": total("logprob_gap_mean") / len(mine),
                "clip_high_fraction": total("clip_high_fraction") / len(mine),
                "training_success": total("training_success") / len(mine),
            }
        )
    base = arms[0]["episodes_per_hour"] if arms else 0.0
    for a in arms:
        a["vs_baseline"] = a["episodes_per_hour"] / base if base else 0.0
        floor = a["seconds_at_matmul_rate"]
        a["episodes_per_hour_at_matmul_rate"] = a["episodes"] / floor * 3600 if floor > 0 else 0.0
    return arms


def seconds_at_matmul_rate(row: dict[str, Any], linear_weights: int, layers: int) -> float:
    """The arm's cycle had its rollout and update products run at the machine's matmul rate
    (bf16's where the arm computes them in bf16), everything else as measured: the floor that
    the same work, done faster, can reach on this machine."""
    machine_rates = row["machine"]
    flags = row["flags"]
    rollout_rate = machine_rates["bf16_matmul_gflops" if "bfloat16" in flags else "matmul_gflops"]
    update_rate = machine_rates["bf16_matmul_gflops" if "--bf16" in flags else "matmul_gflops"]
    rollout_flops = 2 * linear_weights * row["rollout_forwarded_tokens"]
    rest = row["cycle_seconds"] - row["rollout_model_seconds"] - row["update_seconds"]
    update_work = update_flops(row, linear_weights, layers)
    return rest + (rollout_flops / rollout_rate + update_work / update_rate) / 1e9


def _bf16_share(arm: dict[str, Any]) -> str:
    """The rollout rate's share of the bf16 matmul rate; "-" where bf16 is slower than fp32
    (emulated, no ceiling for anything)."""
    if arm["bf16_matmul_gflops"] < arm["matmul_gflops"]:
        return "-"
    return f"{arm['rollout_gflops'] / arm['bf16_matmul_gflops']:.2f}"


def _update_rate(arm: dict[str, Any]) -> str:
    """The update's GFLOP/s and its share of the fp32 matmul rate ("-" where not recorded)."""
    rate = arm.get("update_gflops")
    if not rate:
        return "-"
    return f"{rate:.0f} ({rate / arm['matmul_gflops']:.2f})"


def report(results: dict[str, Any]) -> str:
    """The result file as Markdown: per arm, then per run."""
    args = results["args"]
    lines = [
        run_text(results),
        "",
        f"Recipe `{args['config']}`, one improvement cycle of {args['goals_per_cycle']} goals x "
        f"its group size per run, {results['linear_weights'] / 1e6:.1f}M linear weights in the "
        f"decoder blocks; runs in the order {', '.join(results['order'])}.",
        "",
        "| arm | episodes (turns) | cycle s | rollout s | update s | episodes/hour "
        f"| vs {results['arms'][0]['arm'] if results['arms'] else 'the first arm'} "
        "| rollout GFLOP/s | of fp32 / bf16 matmul | update tokens/s | update GFLOP/s "
        "(of fp32 matmul) | log-prob gap | clipped high | training success |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: "
        "| ---: | ---: |",
    ]
    for a in results["arms"]:
        lines.append(
            f"| {a['arm']} | {a['episodes']} ({a['turns']:.0f}) | {a['cycle_seconds']:.0f} "
            f"| {a['rollout_seconds']:.0f} | {a['update_seconds']:.0f} "
            f"| {a['episodes_per_hour']:.0f} | {a['vs_baseline']:.2f}x "
            f"| {a['rollout_gflops']:.0f} | {a['rollout_gflops'] / a['matmul_gflops']:.2f} / "
            f"{_bf16_share(a)} "
            f"| {a['update_tokens_per_second']:.0f} | {_update_rate(a)} "
            f"| {a['logprob_gap_mean']:.4f} "
            f"| {a['clip_high_fraction']:.3f} | {a['training_success']:.2f} |"
        )
    floors = [a for a in results["arms"] if a.get("episodes_per_hour_at_matmul_rate")]
    if floors:
        base = results["arms"][0]
        lines += [
            "",
            "The same work at the machine's matmul rate: each arm's rollout and update products "
            "run at the matmul rate measured before it (bf16's where it computes in bf16), the "
            "rest of its cycle as measured.",
            "",
            f"| arm | cycle s | at the matmul rate | episodes/hour at it | vs {base['arm']} "
            "(measured) |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for a in floors:
            lines.append(
                f"| {a['arm']} | {a['cycle_seconds']:.0f} | {a['seconds_at_matmul_rate']:.0f} "
                f"| {a['episodes_per_hour_at_matmul_rate']:.0f} "
                f"| {a['episodes_per_hour_at_matmul_rate'] / base['episodes_per_hour']:.2f}x |"
            )
    lines += [
        "",
        "| run | arm | cycle s | episodes/hour | matmul fp32 / bf16 GFLOP/s, load before |",
        "| --- | --- | ---: | ---: | --- |",
    ]
    for i, r in enumerate(results["rows"], start=1):
        m = r["machine"]
        lines.append(
            f"| {i} | {r['arm']} | {r['cycle_seconds']:.0f} | {r['episodes_per_hour']:.0f} "
            f"| {m['matmul_gflops']:.0f} / {m['bf16_matmul_gflops']:.0f}, "
            f"{m['load_average']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/webshop-rft.yaml", help="The recipe.")
    parser.add_argument("--goals-per-cycle", type=int, default=16)
    parser.add_argument("--rounds", type=int, choices=(1, 2), default=1)
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default="out/train_speed.json")
    args = parser.parse_args()
    # This process measures and waits; each arm's `skillrl train` gets the environment it
    # started with (before anything here imports torch).
    args.child_environment = waiting_parent()
    results: dict[str, Any] = {"provenance": provenance("train_speed")}
    args.linear_weights, args.decoder_layers = model_shape(args.config)
    root = Path(args.out).with_suffix("")
    root.mkdir(parents=True, exist_ok=True)
    order = list(args.arms) + (list(reversed(args.arms)) if args.rounds == 2 else [])
    rows = []
    for position, arm in enumerate(order):
        rows.append(run_arm(arm, 1 + position // len(args.arms), args, root))
    results.update(
        args=portable_arguments(
            {
                k: v
                for k, v in vars(args).items()
                if k not in ("linear_weights", "decoder_layers", "child_environment")
            }
        ),
        linear_weights=args.linear_weights,
        decoder_layers=args.decoder_layers,
        order=order,
        rows=rows,
        arms=summarise(rows),
    )
    path = write_result(args.out, results, name="train_speed")
    print(report(json.loads(path.read_text())))


if __name__ == "__main__":
    main()
