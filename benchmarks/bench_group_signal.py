"""GRPO groups with a success: how the sampling rule and temperature set what a cycle learns from.

    python -m benchmarks group_signal --model skillrl/adapters/webshop --goals 16 \\
        --group-size 4 --plays sequence:1.0,sequence:0.5,mean:0.2 --out group_signal.json

GRPO learns the success rate only from groups holding both a success and a failure: a group
that all failed (or all succeeded) has the same success for every member, so the only signal
left in it is the score and the turn cost. This plays the same GRPO groups a ``skillrl train``
cycle plays (``--goals`` training goals in the cycle's seeded order, ``--group-size`` episodes
each, the same environment seed per group, sampled, constrained) for each ``--plays`` row (what
sampled clicks are drawn by, and the temperature). Per row it prints the episodes' success, the
share of groups with at least one success, the share with both outcomes (success signal) and
the share whose returns differ at all (what dynamic sampling keeps). Greedy play of the same
goals is the same-run baseline. The policy's recorded settings (skills, prompt budget,
environment options) are applied as ``skillrl run`` applies them. Figures are printed beside
the machine's matmul rate and load average.
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

from harness import Stopwatch, machine, portable_command, provenance, write_result  # noqa: E402

import envs  # noqa: E402
from skillrl.policies import PolicyConfig, load_policy  # noqa: E402
from skillrl.policies.model_settings import ModelSettings  # noqa: E402
from skillrl.prompts import PromptConfig  # noqa: E402
from trainers.common.episode_metrics import wilson_interval  # noqa: E402
from trainers.common.policy_rollouts import PolicyRollouts  # noqa: E402
from trainers.cycle.config import CycleConfig  # noqa: E402
from trainers.cycle.cycle_rollout import training_goal_order  # noqa: E402
from trainers.cycle.rewards import compute_turn_rewards, default_reward_functions  # noqa: E402
from trainers.cycle.sampling import signal_groups  # noqa: E402


def group_figures(episodes: list[Any], group_size: int) -> dict[str, Any]:
    """Success and the three group shares of one temperature's episodes."""
    groups: dict[str, list[bool]] = {}
    for episode in episodes:
        groups.setdefault(episode.group, []).append(bool(episode.success))
    returns = [sum(r) for r in compute_turn_rewards(episodes, default_reward_functions())]
    differ = signal_groups(episodes, returns)
    n_groups = len(groups)
    successes = sum(e.success for e in episodes)
    low, high = wilson_interval(successes, len(episodes))
    return {
        "episodes": len(episodes),
        "successes": successes,
        "success_rate": successes / len(episodes),
        "success_ci95": [low, high],
        "mean_score": sum(e.score for e in episodes) / len(episodes),
        "mean_turns": sum(e.num_turns for e in episodes) / len(episodes),
        "groups": n_groups,
        "groups_with_success": sum(any(g) for g in groups.values()) / n_groups,
        "groups_with_both": sum(any(g) and not all(g) for g in groups.values()) / n_groups,
        "groups_returns_differ": sum(differ.values()) / n_groups,
        "successes_per_group": {
            str(k): sum(sum(g) == k for g in groups.values()) for k in range(group_size + 1)
        },
    }


def parse_play(text: str) -> tuple[float, str]:
    """``RULE:TEMPERATURE`` -> (temperature, rule), refused with a message naming the row."""
    from skillrl.agents.llm import SAMPLING_SCORES

    rule, _, value = text.strip().partition(":")
    try:
        temperature = float(value)
    except ValueError:
        temperature = -1.0
    if rule not in SAMPLING_SCORES or not temperature > 0:
        raise SystemExit(
            f"--plays: {text.strip()!r} is not RULE:TEMPERATURE with RULE one of "
            f"{', '.join(SAMPLING_SCORES)} and a temperature > 0"
        )
    return temperature, rule


def _line(row: dict[str, Any]) -> str:
    low, high = row["success_ci95"]
    text = f"success {row['successes']}/{row['episodes']} [{low:.2f}, {high:.2f}]"
    text += f"  score {row['mean_score']:.3f}  turns {row['mean_turns']:.1f}"
    if "groups_with_both" in row:
        text += (
            f"  groups: with a success {row['groups_with_success']:.0%}, both outcomes "
            f"{row['groups_with_both']:.0%}, returns differ {row['groups_returns_differ']:.0%}"
        )
    return text


def report(data: dict[str, Any]) -> str:
    """The rows of a results file as a Markdown table (``render_results.py`` calls this)."""
    goals, size = len(data["goals"]), data["group_size"]
    lines = [
        f"`{portable_command(data['command'])}`",
        "",
        f"{goals} training goals x G = {size}, environment {data['env_config']}; greedy plays "
        "each goal once.",
        "",
        "| play | success | 95% interval | score | turns | groups with a success "
        "| both outcomes | returns differ | seconds (GFLOP/s, load) |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, row in data["rows"].items():
        low, high = row["success_ci95"]
        m = row["machine"]
        lines.append(
            f"| {name} | {row['successes']}/{row['episodes']} | [{low:.2f}, {high:.2f}] "
            f"| {row['mean_score']:.3f} | {row['mean_turns']:.1f} "
            f"| {row['groups_with_success']:.0%} | {row['groups_with_both']:.0%} "
            f"| {row['groups_returns_differ']:.0%} "
            f"| {row['seconds']:.0f} ({m['matmul_gflops']}, {m['load_average']:.1f}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="Checkpoint or LoRA adapter folder.")
    parser.add_argument("--env", default="webshop", help="Environment id.")
    parser.add_argument("--goals", type=int, default=16, help="Training goals (one group each).")
    parser.add_argument("--group-size", type=int, default=4, help="Episodes per group.")
    parser.add_argument(
        "--plays",
        default="sequence:1.0,sequence:0.5,mean:0.2",
        help="Comma-separated RULE:TEMPERATURE rows; RULE is what sampled clicks are drawn by "
        "(sequence: summed log-probs, the model's own distribution; mean: the per-token score "
        "greedy ranks by). Greedy play of the same goals always runs first.",
    )
    parser.add_argument("--max-turns", type=int, default=8, help="Turn cap per episode.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the goal order.")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for torch.")
    parser.add_argument("--out", default=None, help="JSON file of the figures.")
    args = parser.parse_args()
    plays = [(0.0, "mean")] + [parse_play(p) for p in args.plays.split(",") if p.strip()]

    settings = ModelSettings.load(args.model)
    env_config: dict[str, Any] = {"max_turns": args.max_turns}
    prompt_tokens = 512
    if settings is not None:
        if settings.env_id == args.env:
            env_config.update(settings.env_options)
        prompt_tokens = settings.max_prompt_tokens
    if settings is not None and settings.skills:
        raise SystemExit("this probe plays without skills; the model was trained with them")
    run = provenance("group_signal")
    with Stopwatch() as clock:
        policy = load_policy(PolicyConfig(model=args.model, threads=args.threads))
    load_seconds = clock.wall
    runner = PolicyRollouts(
        policy,
        env_id=args.env,
        max_turns=args.max_turns,
        constrained=True,
        env_config=env_config,
        prompt_config=PromptConfig(max_prompt_tokens=prompt_tokens),
        count_retrievals=False,
    )
    config = CycleConfig(env_id=args.env, seed=args.seed, group_size=args.group_size)
    size = envs.adapter_for(args.env).split_size(config.train_split, env_config)
    goals = training_goal_order(config, size)[: args.goals]
    results: dict[str, Any] = {
        "provenance": run,
        "command": run["command"],
        "model": args.model,
        "env": args.env,
        "env_config": env_config,
        "goals": goals,
        "group_size": args.group_size,
        "model_load_seconds": load_seconds,
        "rows": {},
    }

    def play(temperature: float, scores: str) -> dict[str, Any]:
        runner.sampling_scores = scores
        before = machine()
        repeats = 1 if temperature == 0 else args.group_size
        starts = [
            runner.start(config.train_split, g, seed=args.seed + g, group_id=f"g{g}")
            for g in goals
            for _ in range(repeats)
        ]
        with Stopwatch() as clock:
            episodes = runner.run(starts, temperature=temperature, sampling_seed=args.seed)
        row = group_figures(episodes, repeats)
        row.update({"seconds": clock.wall, "machine": before})
        return row

    print(f"model {args.model}, env {env_config}, {len(goals)} training goals", flush=True)
    for temperature, rule in plays:
        key = "greedy" if temperature == 0 else f"{rule} T={temperature}"
        row = play(temperature, rule)
        row.update({"temperature": temperature, "sampling_scores": rule})
        results["rows"][key] = row
        if args.out:
            write_result(args.out, results, name="group_signal")
        name = key
        m = row["machine"]
        print(
            f"{name:>7}: {_line(row)}  [{row['seconds']:.0f} s at {m['matmul_gflops']} GFLOP/s, "
            f"load {m['load_average']:.1f}]",
            flush=True,
        )


if __name__ == "__main__":
    main()
