"""Agent quality on test goals: the embedded model with/without skills, constrained vs free
decoding, and the scripted expert beside them, all on the same goals in the same run.

    python benchmarks/bench_agent_quality.py --goals 50 --max-turns 15
    python benchmarks/bench_agent_quality.py --env sokoban --goals 12 --max-turns 12 \
        --bootstrap-episodes 60 --settings expert,constrained+skills,constrained

Skills come from a workspace bank seeded with the environment's shipped starting bank (when it
has one and the bank is empty) or, with ``--bootstrap-episodes N``, bootstrapped from N expert
episodes on training goals (``skillrl bootstrap``). Greedy decoding, so a rerun gives the same
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from harness import Stopwatch, machine_text, provenance, run_text, write_result  # noqa: E402

from memory import BankConfig, SkillBank  # noqa: E402
from skillrl.agents.expert import ExpertAgent  # noqa: E402
from skillrl.agents.llm import LLMAgent  # noqa: E402
from skillrl.distill import AnalyticDistiller  # noqa: E402
from skillrl.distill.bootstrap import BootstrapConfig, bootstrap_bank  # noqa: E402
from skillrl.distill.seeding import seed_bank_if_empty  # noqa: E402
from skillrl.policies import PolicyConfig, load_policy  # noqa: E402
from skillrl.prompts import PromptConfig  # noqa: E402
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine  # noqa: E402
from trainers.common.episode_metrics import wilson_interval  # noqa: E402


def evaluate(agent, bank, starts, max_turns: int) -> dict:
    config = RolloutConfig(max_turns=max_turns, max_parallel=len(starts), count_retrievals=False)
    engine = RolloutEngine(agent, bank=bank, config=config)
    records = engine.run(starts)
    n = len(records)
    return {
        "success_rate": sum(r.success for r in records) / n,
        "mean_score": sum(r.score for r in records) / n,
        "mean_turns": sum(r.num_turns for r in records) / n,
        "invalid_rate": sum(r.invalid_actions for r in records)
        / max(sum(r.num_turns for r in records), 1),
        "purchases": sum(bool(r.turns and r.turns[-1].terminated) for r in records),
        "seconds": engine.stats.wall_seconds,
    }


SETTING_NAMES = {
    "expert": "the scripted expert",
    "constrained+skills": "SmolLM2-135M constrained, with skills",
    "constrained": "SmolLM2-135M constrained, no skills",
    "free+skills": "SmolLM2-135M free, with skills",
    "free": "SmolLM2-135M free, no skills",
}


def report(results: dict) -> str:
    """A results file as Markdown: each setting on the same goals, the expert beside them."""
    args, goals = results["args"], results["args"]["goals"]
    lines = [
        run_text(results),
        "",
        f"{args['env']} test goals 0-{goals - 1}, at most {args['max_turns']} turns, greedy, "
        f"prompts of at most {args['max_prompt_tokens']} tokens; the bank held "
        f"{results['bank_entries']} entries.",
        "",
        "| setting | success | 95% interval | mean score | mean turns | invalid-action rate "
        "| ended by the agent | seconds |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for setting, row in results["settings"].items():
        wins = round(row["success_rate"] * goals)
        low, high = wilson_interval(wins, goals)
        lines.append(
            f"| {SETTING_NAMES.get(setting, setting)} | {wins}/{goals} | [{low:.2f}, {high:.2f}] "
            f"| {row['mean_score']:.3f} | {row['mean_turns']:.1f} | {row['invalid_rate']:.2f} "
            f"| {row['purchases']}/{goals} | {row['seconds']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="webshop", help="environment id")
    parser.add_argument("--goals", type=int, default=50, help="test goals 0..N-1")
    parser.add_argument(
        "--bootstrap-episodes",
        type=int,
        default=0,
        help="fill the bank from this many expert episodes instead of the shipped starting bank",
    )
    parser.add_argument("--max-turns", type=int, default=15)
    parser.add_argument("--workspace", default=None, help="workspace (default: a temp one)")
    parser.add_argument(
        "--settings", default="expert,free+skills,free,constrained+skills,constrained"
    )
    parser.add_argument(
        "--out", dest="json_path", default=None, help="also write the figures to this JSON file"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--max-prompt-tokens", type=int, default=900, help="prompt budget")
    args = parser.parse_args()
    run = provenance("agent_quality")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    workspace = Path(args.workspace or tempfile.mkdtemp(prefix="bench-quality-"))
    bank = SkillBank.open(BankConfig(workspace=workspace))
    if args.bootstrap_episodes:
        config = BootstrapConfig(env=args.env, episodes=args.bootstrap_episodes)
        bootstrap_bank(bank, AnalyticDistiller(), config)
    else:
        seed_bank_if_empty(bank, args.env)
    entries = bank.count()
    policy = load_policy(PolicyConfig(model="embedded", workspace=workspace))
    starts = [
        EpisodeStart(args.env, "test", i, seed=i, env_config={"max_turns": args.max_turns})
        for i in range(args.goals)
    ]
    results = {}
    for setting in args.settings.split(","):
        with Stopwatch() as clock:
            if setting == "expert":
                agent = ExpertAgent(max_turns=args.max_turns)
            else:
                agent = LLMAgent(
                    policy,
                    PromptConfig(max_prompt_tokens=args.max_prompt_tokens),
                    constrained=setting.startswith("constrained"),
                    uses_skills=setting.endswith("+skills"),
                )
            results[setting] = evaluate(agent, bank, starts, args.max_turns)
        print(f"{setting}: done in {clock.wall:.0f}s {json.dumps(results[setting])}", flush=True)
    bank.close()
    print(
        f"\n{args.goals} {args.env} test goals, max {args.max_turns} turns, embedded "
        f"SmolLM2-135M, greedy, prompts <= {args.max_prompt_tokens} tokens; bank: {entries} entries"
    )
    print(
        f"{'setting':<22}{'success':>9}{'score':>8}{'turns':>7}{'invalid':>9}{'bought':>8}{'s':>7}"
    )
    for name, r in results.items():
        print(
            f"{name:<22}{r['success_rate']:>9.2f}{r['mean_score']:>8.3f}{r['mean_turns']:>7.1f}"
            f"{r['invalid_rate']:>9.2f}{r['purchases']:>8}{r['seconds']:>7.0f}"
        )
    print(f"machine at start: {machine_text(run['machine_at_start'])}")
    if args.json_path:
        figures = {"provenance": run, "args": vars(args), "bank_entries": entries}
        write_result(args.json_path, {**figures, "settings": results}, name="agent_quality")


if __name__ == "__main__":
    main()
