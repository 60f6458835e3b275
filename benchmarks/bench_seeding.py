"""First-run seeding: importing the shipped starting bank vs bootstrapping live, same run.

Run: python benchmarks/bench_seeding.py [--episodes 300] [--out F.json]

A new user's first ``skillrl run --env webshop`` finds an empty bank. Two ways to fill it:
``seed_bank_if_empty`` imports ``skillrl/distill/data/webshop_starting_bank.json`` through
``bank.add_many`` (embeddings and merge-on-insert included), or the bank is bootstrapped live
(the expert and faulty experts play ``--episodes`` training goals, which are distilled). Both
start from a fresh workspace with the MiniLM embedder already loaded (``skillrl run`` loads it for
retrieval anyway; its load time is printed separately).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from harness import Stopwatch, machine_text, provenance, run_text, write_result

from memory import BankConfig, SkillBank
from memory.embedding import SentenceTransformerEmbedder
from skillrl.distill import AnalyticDistiller, seed_bank_if_empty
from skillrl.distill.bootstrap import BootstrapConfig, bootstrap_bank


def timed(embedder, fill) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as folder:
        bank = SkillBank.open(BankConfig(workspace=Path(folder)), embedder=embedder)
        with Stopwatch() as clock:
            fill(bank)
        entries = bank.count()
        bank.close()
    return clock.wall, entries


def report(results: dict) -> str:
    """A results file as Markdown: best wall seconds and entries of each way to fill the bank."""
    lines = [
        run_text(results),
        "",
        f"| first bank | best of {len(results['shipped'])} (s) | entries |",
        "| --- | ---: | ---: |",
        f"| seeded from the shipped starting bank | {results['best_shipped_seconds']:.2f} "
        f"| {results['shipped_entries']} |",
        f"| bootstrapped live from {results['args']['episodes']} episodes (baseline) "
        f"| {results['best_live_seconds']:.2f} | {results['live_entries']} |",
        "",
        f"Seeding is {results['speed_up']:.1f}x faster; loading the embedder first takes "
        f"{results['embedder_load_seconds']:.1f} s either way.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()
    run = provenance("seeding")
    with Stopwatch() as load:
        embedder = SentenceTransformerEmbedder()
        embedder.embed(["warm up"])
    print(f"embedder load (paid by either path): {load.wall:.1f}s")
    config = BootstrapConfig(episodes=args.episodes)
    shipped = [
        timed(embedder, lambda b: seed_bank_if_empty(b, "webshop")) for _ in range(args.repeats)
    ]
    live = [timed(embedder, lambda b: bootstrap_bank(b, AnalyticDistiller(), config))
            for _ in range(args.repeats)]  # fmt: skip
    best_shipped, best_live = min(shipped), min(live)
    print(f"{'path':<40}{'seconds':>9}{'entries':>9}")
    print(f"{'shipped starting bank (seed_bank_if_empty)':<40}{best_shipped[0]:>9.2f}"
          f"{best_shipped[1]:>9}")  # fmt: skip
    print(f"{f'live bootstrap, {args.episodes} episodes (baseline)':<40}{best_live[0]:>9.2f}"
          f"{best_live[1]:>9}")  # fmt: skip
    print(f"shipped is {best_live[0] / best_shipped[0]:.1f}x faster (best of {args.repeats})")
    print(f"machine at start: {machine_text(run['machine_at_start'])}")
    if args.out:
        figures = {
            "provenance": run,
            "args": vars(args),
            "embedder_load_seconds": load.wall,
            # Every repeat as [seconds, entries]; the printed figure is the best.
            "shipped": shipped,
            "live": live,
            "best_shipped_seconds": best_shipped[0],
            "best_live_seconds": best_live[0],
            "shipped_entries": best_shipped[1],
            "live_entries": best_live[1],
            "speed_up": best_live[0] / best_shipped[0],
        }
        write_result(args.out, figures, name="seeding")


if __name__ == "__main__":
    main()
