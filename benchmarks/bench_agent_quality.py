"""Agent quality on WebShop test goals: the embedded model with/without skills, constrained vs
free decoding, and the scripted expert beside them, all on the same goals in the same run.

    python benchmarks/bench_agent_quality.py --goals 50 --max-turns 15

Skills come from a workspace bank seeded with the shipped starting bank (when empty). Greedy
decoding, so a rerun gives the same figures.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from harness import Stopwatch, machine_text, provenance, write_result  # noqa: E402

from memory import BankConfig, SkillBank  # noqa: E402
from skillrl.agents.expert import ExpertAgent  # noqa: E402
from skillrl.agents.llm import LLMAgent  # noqa: E402
from skillrl.distill.seeding import seed_bank_if_empty  # noqa: E402
from skillrl.policies import PolicyConfig, load_policy  # noqa: E402
from skillrl.prompts import PromptConfig  # noqa: E402
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=50)
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
    seed_bank_if_empty(bank, "webshop")
    policy = load_policy(PolicyConfig(model="embedded", workspace=workspace))
    starts = [
        EpisodeStart("webshop", "test", i, seed=i, env_config={"max_turns": args.max_turns})
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
        f"\n{args.goals} WebShop test goals, max {args.max_turns} turns, embedded SmolLM2-135M, "
        f"greedy, prompts <= {args.max_prompt_tokens} tokens; bank: seeded starting bank"
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
        # The settings stay the file's top-level keys, as before; provenance sits beside them.
        write_result(args.json_path, {**results, "provenance": run}, name="agent_quality")


if __name__ == "__main__":
    main()
