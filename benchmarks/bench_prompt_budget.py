"""The prompt budget at run time: one policy on the same test goals at several budgets.

    python -m benchmarks prompt_budget --budgets 384,512,900 --eval-goals 100 --out F.json

Plays the fixed test goals greedily and constrained with one policy (default: the cold-started
adapter the package ships, on the pages it was trained on, ``observation_mode=text_rich``) at
each ``--budgets`` prompt budget, exactly as ``skillrl eval`` plays them (same runner, turn cap,
seeds, query repair), and compares every budget goal by goal with ``--baseline`` (the default
budget, 512). Reports success with its 95% interval, score, turns, prompt tokens and seconds
per turn, each budget's seconds beside the machine's matmul rate and load average before it.
One untimed warm-up episode runs first, and the prompt-prefix cache is emptied before each
budget, so no budget pays another's first-call costs or reuses its prompts.
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

from harness import Stopwatch, machine, machine_text, provenance, run_text, write_result  # noqa: E402

from skillrl.policies import PolicyConfig, load_policy  # noqa: E402
from skillrl.policies.model_settings import shipped_adapter  # noqa: E402
from skillrl.prompts import PromptConfig  # noqa: E402
from skillrl.prompts.builder import DEFAULT_MAX_PROMPT_TOKENS  # noqa: E402
from skillrl_core.records import EpisodeRecord  # noqa: E402
from trainers.common.episode_metrics import compare_paired, summarise, wilson_interval  # noqa: E402
from trainers.common.policy_rollouts import PolicyRollouts  # noqa: E402

NAME = "prompt_budget"


def play(policy: Any, budget: int, args: argparse.Namespace) -> tuple[list[EpisodeRecord], float]:
    """The test goals played greedily at one prompt budget; returns the episodes and wall s."""
    runner = PolicyRollouts(
        policy,
        env_id="webshop",
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        constrained=True,
        env_config={"observation_mode": args.observation_mode},
        prompt_config=PromptConfig(max_prompt_tokens=budget),
    )
    starts = [runner.start("test", i, seed=args.seed + i) for i in range(args.eval_goals)]
    with Stopwatch() as clock:
        episodes = runner.run(
            starts, temperature=0.0, sampling_seed=args.seed, count_retrievals=False
        )
    return episodes, clock.wall


def row(budget: int, episodes: list[EpisodeRecord], seconds: float, before: dict) -> dict:
    s = summarise(episodes)
    wins = sum(e.success for e in episodes)
    turns = sum(e.num_turns for e in episodes)
    prompt = sum(t.prompt_tokens for e in episodes for t in e.turns)
    return {
        "budget": budget,
        "successes": wins,
        "goals": len(episodes),
        "interval": list(wilson_interval(wins, len(episodes))),
        "mean_score": s.mean_score,
        "mean_turns": s.mean_turns,
        "prompt_tokens_per_turn": prompt / max(turns, 1),
        "seconds": seconds,
        "seconds_per_turn": seconds / max(turns, 1),
        "machine": before,
    }


def warm_up(policy: Any, args: argparse.Namespace) -> None:
    """One short untimed episode: first-call costs (allocations, lazy imports) stay out."""
    warm = argparse.Namespace(**{**vars(args), "eval_goals": 1, "max_turns": 2})
    play(policy, DEFAULT_MAX_PROMPT_TOKENS, warm)


def timed_play(
    policy: Any, budget: int, args: argparse.Namespace, label: str
) -> tuple[list[EpisodeRecord], dict]:
    """Play the goals with an empty prompt-prefix cache (no variant reuses another's prompts),
    the machine measured just before; print and return the episodes and their :func:`row`."""
    if policy.prefix_cache is not None:
        policy.prefix_cache.clear()
    before = machine()
    episodes, seconds = play(policy, budget, args)
    r = row(budget, episodes, seconds, before)
    print(
        f"{label}: {r['successes']}/{r['goals']}, score {r['mean_score']:.3f}, "
        f"{r['seconds_per_turn']:.2f} s/turn ({machine_text(before)} before)",
        flush=True,
    )
    return episodes, r


def paired_cells(p: dict) -> str:
    """The shared cells of a goal-by-goal comparison row: success, lost / won, p, score."""
    return (
        f"| {p['successes_baseline']} -> {p['successes']} | {p['lost']} / {p['won']} "
        f"| {p['mcnemar_p']:.3g} | {p['score_difference']:+.3f} +- {p['score_half_width']:.3f} |"
    )


def paired(baseline: list[EpisodeRecord], other: list[EpisodeRecord]) -> dict:
    """Two plays of the same goals compared goal by goal (McNemar on success, score interval)."""
    r = compare_paired(baseline, other)
    return {
        "successes_baseline": r.successes_before,
        "successes": r.successes_after,
        "lost": r.lost,
        "won": r.won,
        "mcnemar_p": r.mcnemar_p,
        "score_difference": r.score_difference,
        "score_half_width": r.score_half_width,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="default: the shipped WebShop adapter")
    parser.add_argument("--budgets", default="384,512,900", help="comma-separated token budgets")
    parser.add_argument("--baseline", type=int, default=DEFAULT_MAX_PROMPT_TOKENS)
    parser.add_argument("--observation-mode", default="text_rich", help="WebShop page text")
    parser.add_argument("--eval-goals", type=int, default=100, help="test goals 0..N-1")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", required=True, help="results JSON (written after each budget)")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    if args.baseline not in budgets:
        raise SystemExit(f"--baseline {args.baseline} is not one of --budgets {budgets}")
    model = args.model or str(shipped_adapter("webshop"))
    results: dict[str, Any] = {"provenance": provenance(NAME), "args": vars(args), "rows": []}
    results["model"] = model
    policy = load_policy(
        PolicyConfig(backend="transformers", model=model, dtype="float32", threads=args.threads)
    )
    played: dict[int, list[EpisodeRecord]] = {}
    warm_up(policy, args)
    for budget in budgets:
        played[budget], r = timed_play(policy, budget, args, f"{budget} tokens")
        results["rows"].append(r)
        write_result(args.out, results, name=NAME)
    results["paired"] = []
    for budget in budgets:
        if budget == args.baseline:
            continue
        results["paired"].append(
            {"budget": budget, **paired(played[args.baseline], played[budget])}
        )
    write_result(args.out, results, name=NAME)


def report(results: dict) -> str:
    """A results file as Markdown: each budget's figures, then each against the baseline."""
    args = results["args"]
    base = args["baseline"]
    base_row = next(r for r in results["rows"] if r["budget"] == base)
    lines = [
        run_text(results),
        "",
        f"Test goals 0-{args['eval_goals'] - 1}, greedy, constrained, at most "
        f"{args['max_turns']} turns, `observation_mode={args['observation_mode']}`; model: "
        f"{'the shipped adapter' if args['model'] is None else args['model']}.",
        "",
        "| budget | success | 95% interval | mean score | mean turns | prompt tokens/turn "
        "| s/turn | vs baseline | matmul GFLOP/s, load before |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results["rows"]:
        m = r["machine"]
        label = f"**{r['budget']}** (baseline)" if r["budget"] == base else str(r["budget"])
        lines.append(
            f"| {label} | {r['successes']}/{r['goals']} "
            f"| [{r['interval'][0]:.2f}, {r['interval'][1]:.2f}] | {r['mean_score']:.3f} "
            f"| {r['mean_turns']:.1f} | {r['prompt_tokens_per_turn']:.0f} "
            f"| {r['seconds_per_turn']:.2f} "
            f"| {r['seconds_per_turn'] / base_row['seconds_per_turn']:.2f}x "
            f"| {m['matmul_gflops']:.0f}, {m['load_average']:.2f} |"
        )
    lines += [
        "",
        f"| goal by goal against {base} | success | lost / won | McNemar p "
        "| score difference (95%) | |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for p in results.get("paired", []):
        resolved = "resolved" if p["mcnemar_p"] < 0.05 else "not resolved"
        lines.append(f"| {p['budget']} {paired_cells(p)} {resolved} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
