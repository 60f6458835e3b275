"""WebShop speed: search latency (p50/p95) and env steps/s, bm25s index vs a naive BM25 scan.

Run: python benchmarks/bench_webshop.py [--big 100000] [--queries 200] [--out F.json]

Both engines use the same analyzer and the same Lucene BM25 formula; the baseline scores every
document in pure Python per query (what a hand-rolled BM25 does), measured in the same run.
Targets: search p50 < 5 ms at 1k products and < 50 ms at 100k.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from harness import Stopwatch, machine_text, provenance, run_text, write_result

import envs
from envs.webshop.catalog_gen import generate_catalog
from envs.webshop.data import load_catalog
from envs.webshop.expert import WebShopExpert, search_query
from envs.webshop.search import K1, TOP_K, Analyzer, B, SearchIndex, document_text


class NaiveBM25:
    """Baseline: per query, score every document in Python with Lucene's BM25."""

    def __init__(self, asins, documents):
        self.asins = list(asins)
        self.analyzer = Analyzer()
        self.docs = [Counter(self.analyzer(d)) for d in documents]
        self.lengths = [sum(c.values()) for c in self.docs]
        self.avgdl = sum(self.lengths) / len(self.docs)
        df = Counter(t for c in self.docs for t in c)
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}

    def search(self, query, k=TOP_K):
        terms = [t for t in self.analyzer(query) if t in self.idf]
        scored = []
        for i, (counts, length) in enumerate(zip(self.docs, self.lengths, strict=True)):
            score = 0.0
            norm = K1 * (1 - B + B * length / self.avgdl)
            for t in terms:
                tf = counts.get(t, 0)
                if tf:
                    score += self.idf[t] * tf / (tf + norm)
            if score > 0:
                scored.append((-score, i))
        scored.sort()
        return [self.asins[i] for _, i in scored[:k]]


def latencies_ms(engine, queries):
    times = []
    for query in queries:
        start = time.perf_counter()
        engine.search(query)
        times.append((time.perf_counter() - start) * 1000)
    return times


def pct(values, q):
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def report_search(label, fast, naive, queries, naive_queries):
    fast_ms = latencies_ms(fast, queries)
    naive_ms = latencies_ms(naive, naive_queries)
    f50, f95, n50, n95 = pct(fast_ms, 50), pct(fast_ms, 95), pct(naive_ms, 50), pct(naive_ms, 95)
    print(
        f"search {label}: bm25s p50 {f50:.2f} ms p95 {f95:.2f} ms | naive scan p50 "
        f"{n50:.2f} ms p95 {n95:.2f} ms | speed-up p50 x{n50 / f50:.1f}"
    )
    return {"p50_ms": f50, "p95_ms": f95, "naive_p50_ms": n50, "naive_p95_ms": n95}


def steps_per_second(env, goals):
    steps, start = 0, time.perf_counter()
    for index in goals:
        obs, info = env.reset(options={"split": "test", "goal_index": index})
        expert = WebShopExpert()
        expert.reset(info)
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(expert.act(obs, info))
            steps += 1
            done = terminated or truncated
    return steps / (time.perf_counter() - start), steps


def bench_default(queries_n):
    """The default catalog: (queries, the printed figures, the catalog's own figures)."""
    with Stopwatch() as clock:
        env = envs.make("webshop")
    load_s = clock.wall
    world = env.world
    products = world.catalog.products
    print(
        f"default catalog: {len(products)} products, {len(world.goals)} goals, "
        f"load + index {load_s:.2f} s"
    )
    queries = [search_query(g.instruction_text) for g in world.goals[:queries_n]]
    naive = NaiveBM25([p.asin for p in products], [document_text(p) for p in products])
    search = report_search("1k", world.index, naive, queries, queries)
    fast_sps, steps = steps_per_second(env, range(200))
    env.world = replace(world, index=naive)
    naive_sps, _ = steps_per_second(env, range(200))
    print(
        f"env steps/s (expert, 200 test episodes, {steps} steps): bm25s {fast_sps:.0f} | "
        f"naive scan {naive_sps:.0f} | x{fast_sps / naive_sps:.1f}"
    )
    catalog = {
        "products": len(products),
        "goals": len(world.goals),
        "load_and_index_seconds": load_s,
        "expert_steps": steps,
    }
    figures = {"search_1k": search, "steps_per_s": fast_sps, "naive_steps_per_s": naive_sps}
    return queries, figures, catalog


def bench_big(n, queries):
    """A generated catalog of ``n`` products: (the printed search figures, its build figures)."""
    with Stopwatch() as generated:
        products, attributes = generate_catalog(n, seed=1)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "items_shuffle_big.json").write_text(json.dumps(products))
            (folder / "items_ins_v2_big.json").write_text(json.dumps(attributes))
            catalog = load_catalog(
                folder / "items_shuffle_big.json", folder / "items_ins_v2_big.json"
            )
    with Stopwatch() as indexed:
        index = SearchIndex.from_products(catalog.products)
    with Stopwatch() as naive_indexed:
        docs = [document_text(p) for p in catalog.products]
        naive = NaiveBM25([p.asin for p in catalog.products], docs)
    generated_s, index_s, naive_s = generated.wall, indexed.wall, naive_indexed.wall
    print(
        f"{n} products: generated+loaded {generated_s:.1f} s, bm25s index {index_s:.1f} s, "
        f"naive index {naive_s:.1f} s"
    )
    search = report_search(f"{n // 1000}k", index, naive, queries, queries[:20])
    build = {
        "products": n,
        "generated_and_loaded_seconds": generated_s,
        "index_seconds": index_s,
        "naive_index_seconds": naive_s,
    }
    return search, build


def report(results: dict) -> str:
    """A results file as Markdown: search latency and env speed, index against the naive scan."""
    small, big = results["search_1k"], results["search_big"]
    products = (results["default_catalog"]["products"], results["big_catalog"]["products"])
    lines = [
        run_text(results),
        "",
        "| measure | bm25s index | naive scan (baseline) | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for count, row in zip(products, (small, big), strict=True):
        lines.append(
            f"| search p50 / p95, {count:,} products "
            f"| {row['p50_ms']:.2f} / {row['p95_ms']:.2f} ms "
            f"| {row['naive_p50_ms']:.2f} / {row['naive_p95_ms']:.2f} ms "
            f"| x{row['naive_p50_ms'] / row['p50_ms']:.0f} (p50) |"
        )
    steps, naive = results["steps_per_s"], results["naive_steps_per_s"]
    expert_steps = results["default_catalog"]["expert_steps"]
    lines.append(
        f"| env steps/s (the expert, {expert_steps:,} steps) | {steps:,.0f} | {naive:,.0f} "
        f"| x{steps / naive:.1f} |"
    )
    catalog = results["big_catalog"]
    lines += [
        "",
        f"Indexing {products[1]:,} products: {catalog['index_seconds']:.1f} s (generating and "
        f"loading them: {catalog['generated_and_loaded_seconds']:.1f} s).",
    ]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", type=int, default=100_000, help="products in the big catalog")
    parser.add_argument("--queries", type=int, default=200, help="queries per measurement")
    parser.add_argument("--out", default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()
    run = provenance("webshop")
    print(f"machine at start: {machine_text(run['machine_at_start'])}")
    queries, results, default_catalog = bench_default(args.queries)
    results["search_big"], big_catalog = bench_big(args.big, queries)
    print(json.dumps(results, indent=2))
    if args.out:
        figures = {
            "provenance": run,
            "args": vars(args),
            **results,
            "default_catalog": default_catalog,
            "big_catalog": big_catalog,
        }
        write_result(args.out, figures, name="webshop")


if __name__ == "__main__":
    main()
