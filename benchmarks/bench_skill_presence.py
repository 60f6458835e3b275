"""Skills in the prompt on every page type: the share of turns whose prompt holds a retrieved entry.

    python benchmarks/bench_skill_presence.py --goals 100 --out docs/results/skill_presence.json

The scripted expert plays WebShop test goals 0..N-1 with the seeded skill bank; at every turn the
prompt the embedded policy would get (its own tokenizer counts the budget) is built twice: with
the prompt rules as they are (a turn keeps :attr:`PromptConfig.min_skills` skills, shortened,
and the page gives way) and, as the same-run baseline, with the old rule (``min_skills=0``:
skills are cut first, so a long page drops all of them). Printed per page type: turns, the
share with at least one entry, mean entries and mean prompt tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Stopwatch, machine_text, provenance, write_result  # noqa: E402

from envs.webshop.agent_adapter import page_kind  # noqa: E402
from skillrl.agents.base import AgentDecision, AgentState  # noqa: E402
from skillrl.agents.expert import ExpertAgent  # noqa: E402
from skillrl.prompts import PromptConfig, build_prompt  # noqa: E402
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine  # noqa: E402

RULES = {"one skill kept (now)": 1, "skills cut first (before)": 0}
"""Prompt rule name -> :attr:`PromptConfig.min_skills`."""


class PromptRecorder(ExpertAgent):
    """The expert, asking for skills; each turn's prompt is built under every rule and counted."""

    uses_skills = True

    def __init__(self, max_turns: int, count: Any, budget: int) -> None:
        super().__init__(max_turns=max_turns)
        self.count = count
        self.configs = {
            name: PromptConfig(max_prompt_tokens=budget, min_skills=floor)
            for name, floor in RULES.items()
        }
        self.rows: list[dict[str, Any]] = []

    def act(self, states: list[AgentState]) -> list[AgentDecision]:
        for state in states:
            row: dict[str, Any] = {"page": page_kind(state.available_actions)}
            for name, config in self.configs.items():
                built = build_prompt(state, config, self.count)
                row[name] = {"skills": len(built.skill_ids), "tokens": built.total_tokens}
            self.rows.append(row)
        return super().act(states)


def table(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per rule and page type: turns, share with at least one entry, mean entries and tokens."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for rule in RULES:
        pages: dict[str, list[dict[str, int]]] = defaultdict(list)
        for row in rows:
            pages[row["page"]].append(row[rule])
        out[rule] = {
            page: {
                "turns": len(cells),
                "with_a_skill": sum(c["skills"] > 0 for c in cells) / len(cells),
                "mean_skills": sum(c["skills"] for c in cells) / len(cells),
                "mean_tokens": sum(c["tokens"] for c in cells) / len(cells),
            }
            for page, cells in sorted(pages.items())
        }
    return out


def report(results: dict[str, Any]) -> str:
    """The per-page-type table as Markdown."""
    lines = [
        "| prompt rule | page | turns | turns with a skill | mean skills | mean prompt tokens |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for rule, pages in results["table"].items():
        for page, cell in pages.items():
            lines.append(
                f"| {rule} | {page} | {cell['turns']} | {100 * cell['with_a_skill']:.0f}% | "
                f"{cell['mean_skills']:.2f} | {cell['mean_tokens']:.0f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=100, help="test goals 0..N-1")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-prompt-tokens", type=int, default=PromptConfig().max_prompt_tokens)
    parser.add_argument("--out", default=None, help="results JSON")
    parser.add_argument("--workspace", default=None, help="bank folder (default: a temporary one)")
    parser.add_argument("--report", action="store_true", help="print the table of --out and stop")
    args = parser.parse_args()
    if args.report:
        print(report(json.loads(Path(args.out).read_text())))
        return
    import tempfile

    from memory import BankConfig, SkillBank
    from skillrl.distill.seeding import seed_bank_if_empty
    from skillrl.policies import PolicyConfig, load_policy

    run = provenance("skill_presence")
    policy = load_policy(PolicyConfig(model="embedded", dtype="float32", device="cpu"))
    with tempfile.TemporaryDirectory() as scratch:
        bank = SkillBank.open(BankConfig(workspace=Path(args.workspace or scratch)))
        seed_bank_if_empty(bank, "webshop")
        agent = PromptRecorder(args.max_turns, policy.count_tokens, args.max_prompt_tokens)
        engine = RolloutEngine(
            agent, bank=bank, config=RolloutConfig(max_turns=args.max_turns, record=False)
        )
        env_config = {"max_turns": args.max_turns}
        with Stopwatch() as clock:
            engine.run(
                [
                    EpisodeStart("webshop", "test", i, seed=i, env_config=env_config)
                    for i in range(args.goals)
                ]
            )
        bank.close()
    results = {
        "provenance": run,
        "command": run["command"],
        "goals": args.goals,
        "max_prompt_tokens": args.max_prompt_tokens,
        "seconds": clock.wall,
        "machine": run["machine_at_start"],
        "table": table(agent.rows),
    }
    if args.out:
        write_result(args.out, results, name="skill_presence")
    print(report(results))
    print(f"{clock.wall:.1f} s; {machine_text(results['machine'])}")


if __name__ == "__main__":
    main()
