"""Rollout throughput: N episodes played together (one batched generation per turn) versus the
same N episodes one after another, same model, same goals, same run.

    python benchmarks/bench_rollout.py --episodes 16 --max-turns 2 [--device cuda] [--bf16]

Prints episodes/min and generated tokens/s for both and their ratio. Free decoding is used (the
generation-heavy path batching is for); skills are off so only the policy and env are timed. The
prompt-prefix cache is emptied before each mode, so neither reuses the other's prompts.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from harness import (  # noqa: E402
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

from skillrl.agents.llm import LLMAgent, LLMAgentConfig  # noqa: E402
from skillrl.policies import PolicyConfig, SamplingConfig, load_policy  # noqa: E402
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine  # noqa: E402


def measure(agent: LLMAgent, starts: list[EpisodeStart], max_turns: int, parallel: int) -> dict:
    policy = agent.policy
    if policy.prefix_cache is not None:
        policy.prefix_cache.clear()  # the same episodes: no mode may reuse the other's prompts
    engine = RolloutEngine(agent, config=RolloutConfig(max_turns=max_turns, max_parallel=parallel))
    records = engine.run(starts)
    stats = engine.stats.to_dict()
    stats["actions"] = [[t.action for t in r.turns] for r in records]
    return stats


def report(results: dict) -> str:
    """A results file as Markdown: batched against one-after-another rollouts, same goals."""
    lines = [
        run_text(results),
        "",
        "| mode | wall s | episodes/min | generated tokens/s | model calls |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    names = {
        "parallel": f"{results['parallel']['episodes']:.0f} episodes together "
        "(one batched generation per turn)",
        "sequential": "the same episodes one after another (baseline)",
    }
    for mode, name in names.items():
        row = results[mode]
        lines.append(
            f"| {name} | {row['wall_seconds']:.1f} | {row['episodes_per_minute']:.1f} "
            f"| {row['tokens_per_second']:.1f} | {row['agent_calls']:.0f} |"
        )
    pairs = zip(results["parallel"]["actions"], results["sequential"]["actions"], strict=True)
    differing = sum(batched != alone for batched, alone in pairs)
    lines += [
        "",
        f"Speed-up: {results['ratio_episodes']:.2f}x in episodes/min, "
        f"{results['ratio_tokens']:.2f}x in generated tokens/s. Episodes whose actions differ "
        f"between the two modes: {differing} of {results['parallel']['episodes']:.0f}.",
    ]
    if "device" in results:  # files written before --device ran on the CPU, unlabelled
        device = results["device"]
        lines[-1] += (
            f" {results['label']}; {peak_memory_source(device['name'])} "
            f"{device['peak_memory_mib']:,.0f} MiB."
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--max-turns", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--workspace", default=None, help="model cache workspace (default: temp)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (CPU only)")
    add_device_options(
        parser,
        bf16_help="run the policy in bf16 (--no-bf16: float32; default: the policy's auto choice)",
        bf16_default=None,
    )
    parser.add_argument(
        "--out", dest="json_path", default=None, help="also write the figures to this JSON file"
    )
    args = parser.parse_args()
    device = resolve_device(parser, args.device)
    run = provenance("rollout")
    start_device(device, threads=args.threads, tf32=args.tf32)

    workspace = Path(args.workspace or tempfile.mkdtemp(prefix="bench-rollout-"))
    dtype = {None: "auto", True: "bfloat16", False: "float32"}[args.bf16]
    config = PolicyConfig(model=args.model, workspace=workspace, device=device, dtype=dtype)
    with Stopwatch() as clock:
        policy = load_policy(config)
    load_s = clock.wall
    sampling = SamplingConfig(max_new_tokens=args.max_new_tokens, stop=["</action>"])
    agent = LLMAgent(policy, config=LLMAgentConfig(sampling=sampling), uses_skills=False)
    starts = [EpisodeStart("webshop", "test", i, seed=i) for i in range(args.episodes)]
    measure(agent, starts[:1], 1, 1)  # warm-up: first-call costs are not throughput

    parallel = measure(agent, starts, args.max_turns, args.episodes)
    print(f"parallel done: {parallel['wall_seconds']:.1f}s", flush=True)
    sequential = measure(agent, starts, args.max_turns, 1)
    print(f"sequential done: {sequential['wall_seconds']:.1f}s", flush=True)
    same = parallel["actions"] == sequential["actions"]
    ratio_eps = parallel["episodes_per_minute"] / sequential["episodes_per_minute"]
    ratio_tok = parallel["tokens_per_second"] / sequential["tokens_per_second"]
    print(
        f"model {args.model} ({policy.model.dtype}), load {load_s:.1f}s, threads "
        f"{__import__('torch').get_num_threads()}, {args.episodes} episodes x "
        f"{args.max_turns} turns, <= {args.max_new_tokens} new tokens per turn"
    )
    print(f"{'mode':<12}{'wall s':>10}{'episodes/min':>15}{'gen tokens/s':>15}{'tokens':>9}")
    for name, s in (("parallel", parallel), ("sequential", sequential)):
        print(
            f"{name:<12}{s['wall_seconds']:>10.1f}{s['episodes_per_minute']:>15.2f}"
            f"{s['tokens_per_second']:>15.2f}{int(s['generated_tokens']):>9}"
        )
    print(
        f"speed-up (parallel / sequential): episodes/min {ratio_eps:.2f}x, "
        f"tokens/s {ratio_tok:.2f}x; same actions both ways: {same}"
    )
    print(f"machine at start: {machine_text(run['machine_at_start'])}")
    if args.json_path:
        figures = {
            "provenance": run,
            "parallel": parallel,
            "sequential": sequential,
            "ratio_episodes": ratio_eps,
            "ratio_tokens": ratio_tok,
            "same_actions": same,
            "label": device_label(
                device,
                bf16=policy.model.dtype == __import__("torch").bfloat16,
                tf32=args.tf32,
                bf16_text="bf16 weights",
                threads=__import__("torch").get_num_threads() if device == "cpu" else None,
            ),
            "device": {"name": device, "peak_memory_mib": peak_memory_mib(device)},
        }
        write_result(args.json_path, figures, name="rollout")


if __name__ == "__main__":
    main()
