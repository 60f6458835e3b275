"""What opening a skill bank costs, and the part of it spent on the index's safety checks.

    python -m benchmarks bank_open --entries 2000 --repeats 10 --out out/bank_open.json

Two banks in fresh workspaces: the shipped starting bank (what ``skillrl run`` opens) and one of
``--entries`` general skills with distinct random words (a large team bank). For each, median
seconds of ``--repeats`` runs of:

- opening for writing and closing (``SkillBank.open``: SQL, the index, the consistency check):
  the baseline every other figure is set against;
- opening read-only and closing;
- the self-query probe alone (``VectorIndex.unsearchable_partitions``: per partition, one
  ``get`` of two stored vectors and one ``query`` with them), which every open runs;
- the private copy alone (copying the index folder, as an open for writing does until its first
  change, and as a read-only open does).

The embedder is loaded once, before any timing (an open does not load it).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import machine, machine_text, provenance, run_text, write_result

from memory import BankConfig, SkillBank
from memory.embedding import SentenceTransformerEmbedder
from memory.index import _private_copy
from memory.types import EntryDraft
from skillrl.distill import seed_bank_if_empty


def median_seconds(repeats: int, action: Callable[[], Any]) -> float:
    """Median wall seconds of ``repeats`` calls of ``action``."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def random_drafts(count: int, seed: int = 0) -> list[EntryDraft]:
    """``count`` general skills of random made-up words (distinct enough that none merges)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(5000)]
    return [
        EntryDraft(
            kind="general",
            title=" ".join(rng.sample(words, 4)),
            principle=" ".join(rng.sample(words, 14)),
            when_to_apply=" ".join(rng.sample(words, 6)),
        )
        for _ in range(count)
    ]


def measure(label: str, workspace: Path, embedder: Any, repeats: int) -> dict[str, Any]:
    config = BankConfig(workspace=workspace)
    with SkillBank.open(config, embedder=embedder) as bank:
        entries = bank.count()
    bytes_ = sum(p.stat().st_size for p in config.chroma_path.rglob("*") if p.is_file())

    def open_close(read_only: bool) -> Callable[[], None]:
        def run() -> None:
            cfg = BankConfig(workspace=workspace, read_only=read_only)
            SkillBank.open(cfg, embedder=embedder).close()

        return run

    def copy() -> None:
        shutil.rmtree(_private_copy(config.chroma_path).parent)

    with SkillBank.open(BankConfig(workspace=workspace, read_only=True), embedder=embedder) as b:
        probe = median_seconds(repeats, b.store.index.unsearchable_partitions)
    row = {
        "bank": label,
        "entries": entries,
        "index_bytes": bytes_,
        "open_write": median_seconds(repeats, open_close(False)),
        "open_read_only": median_seconds(repeats, open_close(True)),
        "probe": probe,
        "copy": median_seconds(repeats, copy),
        "machine": machine(),
    }
    print(
        f"{label}: {entries} entries, open {row['open_write'] * 1e3:.0f} ms, probe "
        f"{row['probe'] * 1e3:.1f} ms, copy {row['copy'] * 1e3:.1f} ms "
        f"({machine_text(row['machine'])})",
        flush=True,
    )
    return row


def report(results: dict[str, Any]) -> str:
    """The result file as Markdown: per bank, each cost and its share of an open for writing."""
    lines = [
        run_text(results),
        "",
        f"Median of {results['args']['repeats']} runs each.",
        "",
        "| bank | entries | index MB | open for writing (baseline) | read-only open "
        "| self-query probe | private copy | matmul GFLOP/s, load |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results["rows"]:
        base = r["open_write"]

        def cell(key: str, r: dict[str, Any] = r, base: float = base) -> str:
            return f"{r[key] * 1e3:.1f} ms ({r[key] / base:.0%})"

        m = r["machine"]
        lines.append(
            f"| {r['bank']} | {r['entries']} | {r['index_bytes'] / 2**20:.1f} "
            f"| {base * 1e3:.0f} ms | {cell('open_read_only')} | {cell('probe')} "
            f"| {cell('copy')} | {m['matmul_gflops']:.0f}, {m['load_average']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", default="out/bank_open.json")
    args = parser.parse_args()
    results: dict[str, Any] = {"provenance": provenance("bank_open"), "args": vars(args)}
    embedder = SentenceTransformerEmbedder()
    embedder.embed(["warm up"])
    rows = []
    with tempfile.TemporaryDirectory() as root:
        shipped = Path(root) / "shipped"
        with SkillBank.open(BankConfig(workspace=shipped), embedder=embedder) as bank:
            seed_bank_if_empty(bank, "webshop")
        rows.append(measure("shipped starting bank (webshop)", shipped, embedder, args.repeats))
        large = Path(root) / "large"
        with SkillBank.open(BankConfig(workspace=large), embedder=embedder) as bank:
            drafts = random_drafts(args.entries)
            for start in range(0, len(drafts), 500):
                bank.add_many(drafts[start : start + 500])
        rows.append(measure(f"{args.entries} random skills", large, embedder, args.repeats))
    results["rows"] = rows
    path = write_result(args.out, results, name="bank_open")
    print(report(json.loads(path.read_text())))


if __name__ == "__main__":
    main()
