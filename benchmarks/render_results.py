"""Render the tables of docs/results.md from the benchmark results kept in docs/results/.

    python benchmarks/render_results.py          # rewrite every rendered block in place
    python benchmarks/render_results.py --check  # exit 1 if a block differs from its JSON

Each block sits between ``<!-- render: NAME -->`` and ``<!-- /render -->``; NAME is a JSON file
in docs/results/, rendered by the ``report`` of the benchmark that wrote it (``benchmark_of``).
The prose around the blocks is written by hand; the figures inside them come only from the JSON
the benchmark wrote.
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


HERE = Path(__file__).resolve().parent


def benchmark_of(name: str) -> str:
    """The benchmark that wrote result file ``name``: ``bench_<b>.py`` with the longest ``b``
    that is ``name`` or starts it followed by ``_`` (``cold_start_curve_rich`` ->
    ``cold_start_curve``, not ``cold_start``)."""
    benchmarks = [p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py")]
    matches = [b for b in benchmarks if name == b or name.startswith(f"{b}_")]
    if not matches:
        raise SystemExit(f"no benchmark wrote docs/results/{name}.json")
    return max(matches, key=len)


def renderer(name: str):
    """Return the function that renders result file ``name`` as Markdown (its ``report``)."""
    import importlib

    module = importlib.import_module(f"bench_{benchmark_of(name)}")
    if not hasattr(module, "report"):
        raise SystemExit(f"bench_{benchmark_of(name)}.py has no report() for {name}.json")
    return module.report


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
