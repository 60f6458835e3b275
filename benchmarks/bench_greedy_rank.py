"""Greedy constrained play ranked by the mean or the summed log-prob of each candidate action.

    python -m benchmarks greedy_rank --model start=skillrl/adapters/webshop \\
        --model trained=<run>/checkpoints/cycle-0008 --ranks sum --eval-goals 100 \\
        --reference start=<run>/cycles/0000/eval.json \\
        --reference trained=<run>/cycles/0008/eval.json \\
        --env-option observation_mode=text_rich --out greedy_rank.json

Constrained decoding scores every admissible action; greedy play takes the best. ``skillrl``
ranks by the mean log-prob per token (``LLMAgentConfig.length_normalize``), so a long option
name is not penalised for its length; but GRPO raises the *summed* log-prob of the actions that
paid (the policy it samples from at temperature 1 and differentiates). This plays the fixed test
goals greedily with each ``--model`` under each rank in ``--ranks``, exactly as a training
run's evaluation plays them (same runner, prompt budget, turn cap, seeds, query repair), and
compares goal by goal: each model's ranks against each other, and the models against each
other under each rank. ``--reference LABEL=eval.json`` adds a run's own evaluation episodes
(``<run>/cycles/<c>/eval.json``, mean-ranked) as that model's ``mean`` row instead of replaying
them. Printed beside the machine's matmul rate and load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Stopwatch, machine, machine_text, portable_command, provenance, write_result  # noqa: E402

from skillrl.policies import PolicyConfig, load_policy  # noqa: E402
from skillrl.prompts import PromptConfig  # noqa: E402
from skillrl_core.records import EpisodeRecord  # noqa: E402
from trainers.common.episode_metrics import compare_paired, summarise, wilson_interval  # noqa: E402
from trainers.common.policy_rollouts import PolicyRollouts  # noqa: E402

NAME = "greedy_rank"
RANKS = {"mean": True, "sum": False}
"""Rank name -> ``LLMAgentConfig.length_normalize``."""


def labelled(pairs: list[str], what: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        label, sep, value = pair.partition("=")
        if not sep or not label or not value:
            raise SystemExit(f"{what} takes LABEL=VALUE, got {pair!r}")
        out[label] = value
    return out


def env_options(pairs: list[str]) -> dict[str, Any]:
    import click

    from skillrl_cli.options import parse_env_options

    try:
        return parse_env_options(pairs)
    except click.BadParameter as error:
        raise SystemExit(f"--env-option: {error.message}") from error


def play(path: str, rank: str, args: argparse.Namespace) -> tuple[list[EpisodeRecord], float]:
    policy = load_policy(
        PolicyConfig(backend="transformers", model=path, dtype="float32", threads=args.threads)
    )
    runner = PolicyRollouts(
        policy,
        env_id=args.env,
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        constrained=True,
        env_config=env_options(args.env_option),
        prompt_config=PromptConfig(max_prompt_tokens=args.max_prompt_tokens),
        length_normalize=RANKS[rank],
    )
    starts = [runner.start("test", i, seed=args.seed + i) for i in range(args.eval_goals)]
    with Stopwatch() as clock:
        episodes = runner.run(
            starts, temperature=0.0, sampling_seed=args.seed, count_retrievals=False
        )
    return episodes, clock.wall


def row(label: str, rank: str, episodes: list[EpisodeRecord], seconds: float | None) -> dict:
    s = summarise(episodes)
    wins = sum(e.success for e in episodes)
    low, high = wilson_interval(wins, len(episodes))
    return {
        "model": label,
        "rank": rank,
        "successes": wins,
        "goals": len(episodes),
        "interval": [low, high],
        "mean_score": s.mean_score,
        "mean_turns": s.mean_turns,
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True, help="LABEL=checkpoint")
    parser.add_argument("--ranks", default="mean,sum", help="comma-separated: mean, sum")
    parser.add_argument(
        "--reference", action="append", default=[], help="LABEL=eval.json (its mean row)"
    )
    parser.add_argument("--env", default="webshop")
    parser.add_argument("--env-option", action="append", default=[])
    parser.add_argument("--eval-goals", type=int, default=100)
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--max-prompt-tokens", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    models = labelled(args.model, "--model")
    references = labelled(args.reference, "--reference")
    ranks = [r.strip() for r in args.ranks.split(",") if r.strip()]
    if unknown := [r for r in ranks if r not in RANKS]:
        raise SystemExit(f"--ranks: unknown {unknown}; one of {', '.join(RANKS)}")
    results: dict[str, Any] = {"provenance": provenance(NAME), "rows": []}
    played: dict[tuple[str, str], list[EpisodeRecord]] = {}
    for label, path in references.items():
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        episodes = [EpisodeRecord.from_dict(e) for e in data["episodes"]]
        played[(label, "mean")] = episodes
        results["rows"].append({**row(label, "mean", episodes, None), "from": path})
    for label, path in models.items():
        for rank in ranks:
            if (label, rank) in played:
                continue
            before = machine()
            episodes, seconds = play(path, rank, args)
            played[(label, rank)] = episodes
            results["rows"].append({**row(label, rank, episodes, seconds), "machine": before})
            r = results["rows"][-1]
            print(
                f"{label} ({rank}): {r['successes']}/{r['goals']} "
                f"[{r['interval'][0]:.2f}, {r['interval'][1]:.2f}], score {r['mean_score']:.3f}, "
                f"{seconds:.0f} s ({machine_text(before)} before)",
                flush=True,
            )
            write_result(args.out, results, name=NAME)
    labels = list(models) + [x for x in references if x not in models]
    pairs = [((m, "mean"), (m, "sum")) for m in labels]
    pairs += [
        ((a, rank), (b, rank))
        for rank in RANKS
        for i, a in enumerate(labels)
        for b in labels[i + 1 :]
    ]
    results["paired"] = []
    for before, after in pairs:
        if before not in played or after not in played:
            continue
        r = compare_paired(played[before], played[after])
        results["paired"].append(
            {
                "before": list(before),
                "after": list(after),
                "successes_before": r.successes_before,
                "successes_after": r.successes_after,
                "lost": r.lost,
                "won": r.won,
                "mcnemar_p": r.mcnemar_p,
                "score_difference": r.score_difference,
                "score_half_width": r.score_half_width,
            }
        )
        print(
            f"{before[0]} ({before[1]}) -> {after[0]} ({after[1]}): "
            f"{r.successes_before} -> {r.successes_after}, lost {r.lost} / won {r.won}, "
            f"McNemar p={r.mcnemar_p:.3g}"
        )
    write_result(args.out, results, name=NAME)


def report(results: dict) -> str:
    """A results file as Markdown: each model under each rank, then the paired comparisons."""
    lines = [
        f"`{portable_command(results['provenance']['command'])}` "
        f"(commit {results['provenance']['commit']})",
        "",
        "| model | greedy rank | test success | 95% interval | mean score | mean turns "
        "| seconds | matmul GFLOP/s, load |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for r in results["rows"]:
        m = r.get("machine")
        seconds = "" if r["seconds"] is None else f"{r['seconds']:.0f}"
        rate = "" if m is None else f"{m['matmul_gflops']}, {m['load_average']:.2f}"
        lines.append(
            f"| {r['model']} | {r['rank']}{' (its run)' if 'from' in r else ''} "
            f"| {r['successes']}/{r['goals']} | [{r['interval'][0]:.2f}, {r['interval'][1]:.2f}] "
            f"| {r['mean_score']:.3f} | {r['mean_turns']:.1f} | {seconds} | {rate} |"
        )
    lines += [
        "",
        "| comparison, goal by goal | success | lost / won | McNemar p | |",
        "| --- | --- | ---: | ---: | --- |",
    ]
    for p in results.get("paired", []):
        (m1, r1), (m2, r2) = p["before"], p["after"]
        lines.append(
            f"| {m1} ({r1}) -> {m2} ({r2}) | {p['successes_before']} -> {p['successes_after']} "
            f"| {p['lost']} / {p['won']} | {p['mcnemar_p']:.3g} "
            f"| {'resolved' if p['mcnemar_p'] < 0.05 else 'not resolved'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
