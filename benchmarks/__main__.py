"""Run one benchmark by name: ``python -m benchmarks NAME [its options]``.

    python -m benchmarks                      # list them, with each one's first docstring line
    python -m benchmarks cold_start_curve --help

NAME is a ``bench_NAME.py`` module of this folder (``render_results`` too). Each module stays a
script of its own (``python benchmarks/bench_NAME.py`` works the same); this is the one entry
point that lists what can be measured.

``harness.py`` is the setup every benchmark shares, not a benchmark (so it is not listed): the
machine's matmul rate and load average printed beside time figures, a ``Stopwatch`` for wall and
CPU seconds, and ``write_result``, which writes a result file atomically with its provenance
(command, commit, start time, machine at the start and at the end).
"""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def available() -> dict[str, Path]:
    """Benchmark name -> its script."""
    scripts = {p.stem.removeprefix("bench_"): p for p in sorted(HERE.glob("bench_*.py"))}
    scripts["render_results"] = HERE / "render_results.py"
    return scripts


def summary(script: Path) -> str:
    """The first line of a script's docstring (read without importing it)."""
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    return doc.splitlines()[0] if doc else ""


def main(argv: list[str]) -> int:
    scripts = available()
    if not argv or argv[0] in ("-h", "--help"):
        width = max(map(len, scripts))
        print("usage: python -m benchmarks NAME [options]   (NAME --help for its options)\n")
        for name, script in scripts.items():
            print(f"  {name:<{width}}  {summary(script)}")
        return 0
    name, *rest = argv
    script = scripts.get(name.removeprefix("bench_").removesuffix(".py"))
    if script is None:
        print(f"no benchmark {name!r}; one of: {', '.join(scripts)}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE))  # the scripts import harness (and each other) by module name
    sys.argv = [str(script), *rest]
    runpy.run_path(str(script), run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
