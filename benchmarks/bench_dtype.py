"""The policy's number format at run time: fp32 against bf16, same policy, same test goals.

    python -m benchmarks dtype --eval-goals 100 --out F.json

``--dtype auto`` (every command's default) runs the transformers policy in bf16 on a CPU with
native bf16 (AVX512-BF16 or AMX) and in fp32 elsewhere, while a training run's policy, and so
its evaluations, are fp32 everywhere. This plays the fixed test goals greedily and constrained
with one policy (default: the shipped adapter, ``observation_mode=text_rich``) in each dtype,
exactly as ``bench_prompt_budget`` plays them at the default budget, and compares the two goal
by goal. Seconds per turn stand beside the machine's matmul rate and load average.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_prompt_budget import paired, paired_cells, timed_play, warm_up  # noqa: E402
from harness import provenance, run_text, write_result  # noqa: E402

from skillrl.policies import PolicyConfig, load_policy  # noqa: E402
from skillrl.policies.model_settings import shipped_adapter  # noqa: E402
from skillrl.policies.transformers_loading import cpu_has_native_bf16  # noqa: E402
from skillrl.prompts.builder import DEFAULT_MAX_PROMPT_TOKENS  # noqa: E402
from skillrl_core.records import EpisodeRecord  # noqa: E402

NAME = "dtype"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="default: the shipped WebShop adapter")
    parser.add_argument("--dtypes", default="float32,bfloat16", help="the first is the baseline")
    parser.add_argument("--observation-mode", default="text_rich", help="WebShop page text")
    parser.add_argument("--eval-goals", type=int, default=100, help="test goals 0..N-1")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", required=True, help="results JSON (written after each dtype)")
    args = parser.parse_args()
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    model = args.model or str(shipped_adapter("webshop"))
    results: dict[str, Any] = {"provenance": provenance(NAME), "args": vars(args), "rows": []}
    results["native_bf16"] = cpu_has_native_bf16()
    played: dict[str, list[EpisodeRecord]] = {}
    for dtype in dtypes:
        policy = load_policy(
            PolicyConfig(backend="transformers", model=model, dtype=dtype, threads=args.threads)
        )
        warm_up(policy, args)
        played[dtype], r = timed_play(policy, DEFAULT_MAX_PROMPT_TOKENS, args, dtype)
        results["rows"].append({"dtype": dtype, **r})
        write_result(args.out, results, name=NAME)
        del policy
    base = dtypes[0]
    results["paired"] = []
    for dtype in dtypes[1:]:
        results["paired"].append(
            {
                "dtype": dtype,
                **paired(played[base], played[dtype]),
                "same_actions": sum(
                    [t.action for t in a.turns] == [t.action for t in b.turns]
                    for a, b in zip(played[base], played[dtype], strict=True)
                ),
            }
        )
    write_result(args.out, results, name=NAME)


def report(results: dict) -> str:
    """A results file as Markdown: each dtype's figures, then each against the first."""
    args = results["args"]
    base = results["rows"][0]
    lines = [
        run_text(results),
        "",
        f"Test goals 0-{args['eval_goals'] - 1}, greedy, constrained, at most "
        f"{args['max_turns']} turns, `observation_mode={args['observation_mode']}`, "
        f"{base['budget']}-token prompts; model: "
        f"{'the shipped adapter' if args['model'] is None else args['model']}; this CPU computes "
        f"bf16 {'natively' if results['native_bf16'] else 'by emulation'}.",
        "",
        "| dtype | success | 95% interval | mean score | mean turns | s/turn | vs baseline "
        "| matmul GFLOP/s, load before |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for i, r in enumerate(results["rows"]):
        m = r["machine"]
        label = f"{r['dtype']} (baseline)" if i == 0 else r["dtype"]
        lines.append(
            f"| {label} | {r['successes']}/{r['goals']} "
            f"| [{r['interval'][0]:.2f}, {r['interval'][1]:.2f}] | {r['mean_score']:.3f} "
            f"| {r['mean_turns']:.1f} | {r['seconds_per_turn']:.2f} "
            f"| {r['seconds_per_turn'] / base['seconds_per_turn']:.2f}x "
            f"| {m['matmul_gflops']:.0f}, {m['load_average']:.2f} |"
        )
    lines += [
        "",
        f"| goal by goal against {base['dtype']} | success | lost / won | McNemar p "
        "| score difference (95%) | episodes with the same actions |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    goals = args["eval_goals"]
    for p in results.get("paired", []):
        lines.append(f"| {p['dtype']} {paired_cells(p)} {p['same_actions']}/{goals} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
