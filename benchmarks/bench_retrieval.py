"""Skill-bank retrieval latency at 1k/10k/100k entries, next to a brute-force numpy baseline.

Entries at scale get random unit vectors (384-d, like all-MiniLM-L6-v2) instead of embedded
texts: embedding 100k texts would take hours on a laptop CPU and does not change how the index
and SQL behave. Query vectors are random unit vectors too; the cost of embedding the query text
with the real MiniLM is measured separately and added in the last column.

Columns (milliseconds, p50 / p95 over repeated calls, same run, same vectors):
- numpy: brute force, one matrix product per kind (with the same env/category filters), top-k;
- index: the Chroma queries alone (``memory.retrieval.search_index``);
- bank: ``retrieve`` without the text embedding (index + SQL read of the entries), not recorded;
- bank+record: the same plus writing retrieval events / ``times_retrieved`` (what rollouts do);
- +embed: bank+record plus embedding the query text(s) with the packaged MiniLM.

    python benchmarks/bench_retrieval.py            # 1k, 10k, 100k (a few minutes)
    python benchmarks/bench_retrieval.py --sizes 1000 10000 --reps 20 --out retrieval.json

The machine's matmul rate (one thread, as everything here) and load average are printed with
the table.
"""

from __future__ import annotations

import os

# One thread per library: on a small shared CPU, BLAS/torch thread pools fighting over two
# cores made every figure (the numpy baseline included) several times slower and noisier.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from harness import machine_text, provenance, run_text, write_result  # noqa: E402
from sqlalchemy import insert  # noqa: E402

from memory import BankConfig, RetrievalConfig, RetrievalQuery, SkillBank  # noqa: E402
from memory.embedding import shared_embedder  # noqa: E402
from memory.models import EntryRow, utcnow  # noqa: E402
from memory.retrieval import query_text, retrieve_vectors, search_index  # noqa: E402

COLUMNS = ("numpy", "index", "bank", "bank+record", "+embed")
"""The table's latency columns, in order (each p50 / p95 milliseconds)."""

DIM = 384
CATEGORIES = ["apparel", "footwear", "home_decor", "electronics", "accessories", "beauty", "other"]
CONFIG = RetrievalConfig(k_general=2, k_task=3, k_mistakes=2, min_similarity=-1.0)


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def fill(bank: SkillBank, n: int, rng: np.random.Generator) -> tuple[np.ndarray, list[dict]]:
    """Insert n entries (20% general, 60% task over 7 categories, 20% notes) with random vectors."""
    kinds = rng.choice(["general", "task", "mistake"], size=n, p=[0.2, 0.6, 0.2])
    now = utcnow()
    rows = []
    for i, kind in enumerate(kinds):
        rows.append({
            "id": uuid.uuid4().hex, "kind": str(kind), "title": f"entry {i}",
            "principle": f"principle {i}", "when_to_apply": "", "failure_point": "",
            "flawed_action": "", "correction": "", "source": "bench", "reason": "",
            "env": None if kind == "general" else "webshop",
            "category": CATEGORIES[i % len(CATEGORIES)] if kind == "task" else None,
            "status": "active", "revision": 1, "support_count": 1, "times_retrieved": 0,
            "episodes_retrieved": 0, "success_episodes": 0, "failure_episodes": 0,
            "created_at": now, "updated_at": now,
        })  # fmt: skip
    vectors = unit(rng, n)
    with bank.store.transaction() as (session, _undo):
        session.execute(insert(EntryRow), rows)
        metadata = [{"kind": r["kind"], "env": r["env"] or "", "category": r["category"] or "",
                     "revision": 1} for r in rows]  # fmt: skip
        bank.store.index.upsert([r["id"] for r in rows], vectors, metadata)
    return vectors, rows


def brute_force(vectors: np.ndarray, rows: list[dict]) -> Callable[[np.ndarray, list], None]:
    """The numpy baseline: per kind (and category), one matrix product and a partial sort."""
    kinds = np.array([r["kind"] for r in rows])
    cats = np.array([r["category"] or "" for r in rows])
    general = vectors[kinds == "general"]
    mistakes = vectors[kinds == "mistake"]
    task = {c: vectors[(kinds == "task") & (cats == c)] for c in CATEGORIES}

    def top(matrix: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
        sims = queries @ matrix.T
        idx = np.argpartition(-sims, k, axis=1)[:, :k]
        order = np.take_along_axis(sims, idx, axis=1).argsort(axis=1)[:, ::-1]
        return np.take_along_axis(idx, order, axis=1)

    def search(queries: np.ndarray, categories: list[str]) -> None:
        top(general, queries, CONFIG.k_general)
        top(mistakes, queries, CONFIG.k_mistakes)
        for c in set(categories):
            rows_of = [i for i, q in enumerate(categories) if q == c]
            top(task[c], queries[rows_of], CONFIG.k_task)

    return search


def timed(fn: Callable[[], object], reps: int) -> tuple[float, float]:
    fn()  # warm up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.95 * len(times)))]


def run_figures(bank, baseline, queries, q, cats, reps) -> list[tuple[float, float]]:
    return [
        timed(lambda: baseline(q, cats), reps),
        timed(lambda: search_index(bank.store, queries, q, CONFIG), reps),
        timed(lambda: retrieve_vectors(bank.store, queries, q, CONFIG, record=False), reps),
        timed(lambda: retrieve_vectors(bank.store, queries, q, CONFIG, record=True), reps),
    ]


def measure(n: int, reps: int, embed_ms: dict[int, tuple[float, float]]) -> tuple[list[str], dict]:
    """The table's lines for ``n`` entries, and the same figures as a dict."""
    rng = np.random.default_rng(n)
    lines = []
    found: dict = {"entries": n, "batches": {}}
    with tempfile.TemporaryDirectory() as tmp:
        config = BankConfig(workspace=Path(tmp))
        with SkillBank.open(config, embedder=shared_embedder()) as bank:
            start = time.perf_counter()
            vectors, rows = fill(bank, n, rng)
            build = time.perf_counter() - start
            assert bank.check().ok
            baseline = brute_force(vectors, rows)
            for batch in (1, 16):
                cats = [CATEGORIES[i % len(CATEGORIES)] for i in range(batch)]
                queries = [RetrievalQuery("buy", "", "webshop", c) for c in cats]
                figures = run_figures(bank, baseline, queries, unit(rng, batch), cats, reps)
                e50, e95 = embed_ms[batch]
                figures.append((figures[-1][0] + e50, figures[-1][1] + e95))
                cells = " | ".join(f"{p50:.1f} / {p95:.1f}" for p50, p95 in figures)
                ratio = figures[2][0] / figures[0][0]
                lines.append(f"| {n:,} | {batch} | {cells} | {ratio:.1f}x |")
                found["batches"][str(batch)] = {
                    **{f"{column}_ms": list(f) for column, f in zip(COLUMNS, figures, strict=True)},
                    "bank_over_numpy": ratio,
                }
            found["build_seconds"] = build
            print(f"  built {n:,} entries in {build:.1f} s", flush=True)
    return lines, found


COLUMNS = {
    "numpy_ms": "numpy brute force (baseline)",
    "index_ms": "Chroma queries",
    "bank_ms": "bank retrieve",
    "bank+record_ms": "+ recording",
    "+embed_ms": "+ embedding the query",
}
"""Figures of a results file, in the order of the report's columns, with their headings."""


def ms(value: float) -> str:
    """Milliseconds with two decimals below 1 ms, one above."""
    return f"{value:.2f}" if value < 1 else f"{value:.1f}"


def report(results: dict) -> str:
    """A results file as Markdown: p50 / p95 ms per size and batch, brute force as the baseline."""
    lines = [
        run_text(results),
        "",
        f"p50 / p95 ms over {results['args']['reps']} calls; one thread; random 384-d vectors.",
        "",
        "| entries | batch | " + " | ".join(COLUMNS.values()) + " | bank / baseline (p50) |",
        "| ---: | ---: | " + " | ".join("---:" for _ in COLUMNS) + " | ---: |",
    ]
    for size in results["sizes"]:
        for batch, row in size["batches"].items():
            cells = [f"{ms(row[key][0])} / {ms(row[key][1])}" for key in COLUMNS]
            lines.append(
                f"| {size['entries']:,} | {batch} | "
                + " | ".join(cells)
                + f" | {row['bank_over_numpy']:.1f}x |"
            )
    single, batch = results["embed_ms"]["1"], results["embed_ms"]["16"]
    lines += [
        "",
        f"Embedding the query text alone (MiniLM, CPU): {single[0]:.1f} ms p50 for one, "
        f"{batch[0]:.1f} ms for 16.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--reps", type=int, default=30, help="timed calls per figure")
    parser.add_argument("--out", default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()
    run = provenance("retrieval")
    import torch

    torch.set_num_threads(1)
    embedder = shared_embedder()
    instructions = [f"i need size {i} running shoes under 50 dollars" for i in range(16)]
    texts = [
        query_text(RetrievalQuery(t, "[SEP] results [SEP] item", "webshop")) for t in instructions
    ]
    embed_ms = {b: timed(lambda b=b: embedder.embed(texts[:b]), args.reps) for b in (1, 16)}
    lines, sizes = [], []
    for n in args.sizes:
        size_lines, figures = measure(n, args.reps, embed_ms)
        lines += size_lines
        sizes.append(figures)
    print()
    print(
        "| entries | batch | numpy (baseline) | index | bank | bank+record | +embed | bank/numpy |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(lines))
    print(f"\nquery embedding alone (MiniLM, CPU): single {embed_ms[1][0]:.1f} ms p50, "
          f"batch of 16 {embed_ms[16][0]:.1f} ms p50")  # fmt: skip
    print(f"machine at start: {machine_text(run['machine_at_start'])}")
    if args.out:
        figures = {
            "provenance": run,
            "args": vars(args),
            "embed_ms": {str(batch): list(ms) for batch, ms in embed_ms.items()},
            "sizes": sizes,
        }
        write_result(args.out, figures, name="retrieval")


if __name__ == "__main__":
    main()
