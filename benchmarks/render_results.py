"""Render the tables of docs/results.md from the benchmark results kept in docs/results/.

    python benchmarks/render_results.py          # rewrite every rendered block in place
    python benchmarks/render_results.py --check  # exit 1 if a block differs from its JSON

Each block sits between ``<!-- render: NAME -->`` and ``<!-- /render -->``; NAME is a JSON file
in docs/results/ and a renderer below. The prose around the blocks is written by hand; the
figures inside them come only from the JSON the benchmark wrote.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results.md"
BLOCK = re.compile(r"(<!-- render: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /render -->)", re.S)


RENDERED = (
    "cold_start_curve",
    "skill_presence",
    "group_signal",
    "train_cycles",
    "greedy_rank",
    "expert",
    "sokoban_expert",
    "webshop",
    "seeding",
    "compression",
    "rollout",
    "train_throughput",
    "retrieval",
    "speed",
    "agent_quality",
    "prompt_budget",
    "dtype",
    "cold_start",  # after cold_start_curve, which its name also starts
)
"""Benchmarks whose results files are rendered: ``bench_<name>.report`` renders ``<name>*.json``."""


def renderer(name: str):
    """Return the function that renders result file ``name`` as Markdown."""
    import importlib

    for benchmark in RENDERED:
        if name.startswith(benchmark):
            return importlib.import_module(f"bench_{benchmark}").report
    raise SystemExit(f"no renderer for docs/results/{name}.json")


def render(text: str) -> str:
    """Return ``text`` with every block rendered anew from its JSON."""

    def one(match: re.Match) -> str:
        name = match.group("name")
        data = json.loads((ROOT / "docs" / "results" / f"{name}.json").read_text())
        return f"{match.group(1)}{renderer(name)(data)}\n{match.group(4)}"

    return BLOCK.sub(one, text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = RESULTS.read_text()
    rendered = render(text)
    if args.check:
        raise SystemExit(0 if rendered == text else "docs/results.md differs from docs/results/")
    RESULTS.write_text(rendered)


if __name__ == "__main__":
    main()
