"""Compression: tokens of distilled entries injected per turn vs the raw trajectories behind them.

Run: python benchmarks/bench_compression.py [--train-goals 300] [--eval-goals 40] [--out F.json]

1. Bootstrap a fresh bank: the scripted expert (and 30% deliberately faulty experts) play
   ``--train-goals`` WebShop training goals; the analytic distiller distills them.
2. The expert plays ``--eval-goals`` other training goals (not distilled); at every turn the bank
   retrieves what the LLM agent would see (default RetrievalConfig, batched).
3. Per turn, the injected cost is the tokens of those entries; the baseline, measured in the same
   run, is a raw-trajectory memory putting one source trajectory in each slot instead (the mean
   length of the trajectories the entry was distilled from). Two injected figures: the entries in
   full (``render_entries``) and the runtime prompt's skills section (``skillrl.prompts``, which
   cuts each entry to ``max_skill_chars``).

Tokens are counted with the embedded SmolLM2-135M-Instruct tokenizer, read from its GGUF.
SkillRL reports 10-20% token savings against raw trajectories; the aim is 5x or more.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import asdict
from pathlib import Path

from harness import Stopwatch, machine_text, provenance, run_text, write_result

from memory import BankConfig, SkillBank
from memory.types import Entry, RetrievalQuery, RetrievedEntry, RetrievedSkills
from skillrl.agents.base import AgentState
from skillrl.agents.expert import ExpertAgent
from skillrl.distill import AnalyticDistiller
from skillrl.distill.bootstrap import BootstrapConfig, bootstrap_bank
from skillrl.distill.compression import (
    CompressionReport,
    measure_compression,
    smollm2_token_counter,
)
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine


def held_out_turns(bank, first_goal: int, goals: int) -> list[list[Entry]]:
    """What retrieval injects at every turn of expert episodes on goals the bank never saw."""
    starts = [
        EpisodeStart("webshop", split="train", goal_index=first_goal + i, seed=i)
        for i in range(goals)
    ]
    records = RolloutEngine(ExpertAgent(), config=RolloutConfig()).run(starts)
    queries = [
        RetrievalQuery(r.instruction, t.observation, r.env_id, r.category)
        for r in records
        for t in r.turns
    ]
    retrieved = bank.retrieve(queries, record=False)
    return [[hit.entry for hit in skills.all] for skills in retrieved]


def prompt_cost(count):
    """Tokens of the runtime prompt's skills section for one turn's entries (nothing dropped)."""
    from skillrl.prompts.builder import PromptConfig, build_prompt

    config = PromptConfig(max_prompt_tokens=100_000)

    def cost(entries: list[Entry]) -> int:
        skills = RetrievedSkills(task=[RetrievedEntry(e, 1.0) for e in entries])
        state = AgentState("e", "webshop", "task", "fashion", "obs", ["click[buy now]"], 1,
                           skills=skills)  # fmt: skip
        return build_prompt(state, config, count).token_counts["skills"]

    return cost


def report_figures(report: CompressionReport) -> dict:
    """A compression report's fields and the per-turn figures its properties derive."""
    return {
        **asdict(report),
        "raw_per_turn": report.raw_per_turn,
        "injected_per_turn": report.injected_per_turn,
        "ratio": report.ratio,
    }


def report(results: dict) -> str:
    """A results file as Markdown: tokens injected per turn, raw trajectories as the baseline."""
    full, prompted = results["full_text"], results["as_prompted"]
    boot = results["bootstrap"]
    lines = [
        run_text(results),
        "",
        f"{boot['episodes']} training goals bootstrapped into {boot['entries']} entries; "
        f"{results['args']['eval_goals']} other goals played by the expert, "
        f"{results['held_out_turns']} turns with retrieved entries; {full['tokenizer']} tokenizer.",
        "",
        "| injected per turn | tokens | vs raw |",
        "| --- | ---: | --- |",
        f"| raw trajectories in the same slots (baseline) | {full['raw_per_turn']:,.0f} | 1.0x |",
        f"| distilled entries, full text | {full['injected_per_turn']:,.0f} "
        f"| {full['ratio']:.1f}x smaller |",
        f"| distilled entries, as the agent's prompt shows them | "
        f"{prompted['injected_per_turn']:,.0f} | {prompted['ratio']:.1f}x smaller |",
        "",
        f"Token saving against raw trajectories (as prompted): {results['token_saving']:.1%}.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-goals", type=int, default=300)
    parser.add_argument("--eval-goals", type=int, default=40)
    parser.add_argument("--out", default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()
    run = provenance("compression")
    with tempfile.TemporaryDirectory() as folder:
        bank = SkillBank.open(BankConfig(workspace=Path(folder)))
        with Stopwatch() as clock:
            boot = bootstrap_bank(
                bank, AnalyticDistiller(), BootstrapConfig(episodes=args.train_goals)
            )
        entries = bank.count()
        print(f"bootstrap: {boot.episodes} episodes -> {entries} entries "
              f"in {clock.wall:.1f}s ({machine_text(run['machine_at_start'])})")  # fmt: skip
        turns = held_out_turns(bank, args.train_goals, args.eval_goals)
        sources = {e.episode_id: e for e in bank.trajectories.episodes()}
        count = smollm2_token_counter()
        full = measure_compression(turns, sources, count, "SmolLM2-135M-Instruct")
        shown = measure_compression(turns, sources, count, "SmolLM2-135M-Instruct",
                                    injected=prompt_cost(count))  # fmt: skip
        bank.close()
    print(f"held-out turns measured: {full.turns} (of {len(turns)}); tokenizer: {full.tokenizer}")
    print(f"{'per turn':<44}{'tokens':>10}{'vs raw':>10}")
    print(f"{'raw trajectories in the same slots (baseline)':<44}{full.raw_per_turn:>10.0f}"
          f"{1.0:>9.1f}x")  # fmt: skip
    print(f"{'distilled entries, full text':<44}{full.injected_per_turn:>10.0f}"
          f"{full.ratio:>9.1f}x")  # fmt: skip
    print(f"{'distilled entries, as the prompt shows them':<44}{shown.injected_per_turn:>10.0f}"
          f"{shown.ratio:>9.1f}x")  # fmt: skip
    saving = 1 - 1 / full.ratio if full.ratio else 0.0
    print(f"token saving vs raw trajectories: {saving:.0%} (SkillRL reports 10-20%)")
    if args.out:
        figures = {
            "provenance": run,
            "args": vars(args),
            "bootstrap": {"episodes": boot.episodes, "entries": entries, "seconds": clock.wall},
            "held_out_turns": len(turns),
            "full_text": report_figures(full),
            "as_prompted": report_figures(shown),
            "token_saving": saving,
        }
        write_result(args.out, figures, name="compression")


if __name__ == "__main__":
    main()
