"""`skillrl run` and one `skillrl train` cycle at two commits, interleaved in one run.

Run: python -m benchmarks revisions --before REV [--after HEAD] [--repeats 3] --out F.json

A behaviour-neutral refactor must cost no speed. This benchmark checks each of two commits out
into a temporary git worktree, then runs the same two commands from each, alternating the
order every repeat (before, after, after, before, ...) so a drift in the machine's load falls
on both alike:

- ``run``: ``skillrl run --goals 0-N --json --no-record`` with the default model (the shipped
  adapter), from a fresh workspace: bank seeding, model load, and play;
- ``train``: ``skillrl train --cycles 1`` with small goal counts, from a fresh workspace:
  cycle 0's evaluation, then one rollout, distillation, update, evaluation and save.

Each command runs as its own process (``python -c "from cli import main"`` with the worktree
first on ``PYTHONPATH``), timed by wall clock and by its CPU seconds (``RUSAGE_CHILDREN``). The
figure is each revision's median, and the ratio is after / before (above 1: after is slower).
The machine's matmul rate and load average are printed beside them, at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import machine, machine_text, provenance, run_text, write_result

REPO = Path(__file__).resolve().parents[1]
LAUNCH = "import sys; from cli import main; sys.argv[0] = 'skillrl'; main()"


def workloads(args: argparse.Namespace) -> dict[str, list[str]]:
    """The commands timed, by name (each runs in a fresh workspace given after them)."""
    threads = ["--threads", str(args.threads)]
    return {
        "run": ["run", "--env", "webshop", "--goals", f"0-{args.run_goals - 1}", "--json",
                "--no-record", "--max-turns", str(args.max_turns), *threads],
        "train": ["train", "--env", "webshop", "--cycles", "1",
                  "--goals-per-cycle", str(args.train_goals), "--group-size", "2",
                  "--eval-goals", str(args.train_goals),
                  "--max-turns", str(args.max_turns), "--run-name", "speed", *threads],
    }  # fmt: skip


def check_out(revision: str, folder: Path) -> str:
    """Check ``revision`` out into ``folder`` (a detached worktree); return its full commit."""
    full = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", f"{revision}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if full.returncode != 0:
        raise SystemExit(f"--before/--after {revision!r}: not a commit of this repository")
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(folder),
         full.stdout.strip()],
        check=True,
    )  # fmt: skip
    return full.stdout.strip()


def timed(tree: Path, arguments: list[str], scratch: Path) -> dict[str, float]:
    """Run one command from ``tree`` in a fresh workspace; its wall and CPU seconds."""
    workspace = Path(tempfile.mkdtemp(prefix="ws-", dir=scratch))
    env = {**os.environ, "PYTHONPATH": str(tree), "SKILLRL_WORKSPACE": str(workspace)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", LAUNCH, *arguments, "--workspace", str(workspace)],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-15:])
        raise SystemExit(f"`skillrl {' '.join(arguments)}` failed in {tree}:\n{tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_seconds": wall, "cpu_seconds": cpu}


def summarise(results: dict) -> dict:
    """Each workload's median per revision and the after / before ratios."""
    summary = {}
    for name, sides in results["timings"].items():
        medians = {
            side: {
                key: statistics.median(t[key] for t in times)
                for key in ("wall_seconds", "cpu_seconds")
            }
            for side, times in sides.items()
            if times
        }
        if len(medians) == 2:
            medians["ratio"] = {
                key: medians["after"][key] / medians["before"][key]
                for key in ("wall_seconds", "cpu_seconds")
            }
        summary[name] = medians
    return summary


def report(results: dict) -> str:
    """A results file as Markdown: each command's median seconds at both commits, and the ratio."""
    before, after = results["commits"]["before"][:7], results["commits"]["after"][:7]
    lines = [
        run_text(results),
        "",
        f"| command | before `{before}` wall (s) | after `{after}` wall (s) | wall ratio "
        "| before CPU (s) | after CPU (s) | CPU ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, figures in results["summary"].items():
        if "ratio" not in figures:
            continue
        b, a, r = figures["before"], figures["after"], figures["ratio"]
        lines.append(
            f"| `skillrl {name}` | {b['wall_seconds']:.1f} | {a['wall_seconds']:.1f} "
            f"| {r['wall_seconds']:.2f} | {b['cpu_seconds']:.1f} | {a['cpu_seconds']:.1f} "
            f"| {r['cpu_seconds']:.2f} |"
        )
    repeats = results["args"]["repeats"]
    lines += [
        "",
        f"Medians of {repeats} runs each, the two commits alternating; a ratio above 1 means the "
        "later commit is slower. Commands: "
        + "; ".join(f"`skillrl {' '.join(a)}`" for a in results["workloads"].values())
        + ", each in a fresh workspace.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the earlier commit (a revision)")
    parser.add_argument("--after", default="HEAD", help="the later commit")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--run-goals", type=int, default=16)
    parser.add_argument("--train-goals", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", choices=("run", "train"), default=None)
    parser.add_argument("--out", required=True, help="results JSON")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    commands = workloads(args)
    if args.only:
        commands = {args.only: commands[args.only]}
    results: dict = {
        "provenance": provenance("revisions"),
        "args": vars(args),
        "workloads": commands,
        "commits": {},
        "timings": {name: {"before": [], "after": []} for name in commands},
    }
    print(f"machine at start: {machine_text(results['provenance']['machine_at_start'])}")
    with tempfile.TemporaryDirectory(prefix="bench-revisions-") as scratch_dir:
        scratch = Path(scratch_dir)
        trees = {}
        try:
            for side in ("before", "after"):
                trees[side] = scratch / side
                results["commits"][side] = check_out(getattr(args, side), trees[side])
            for repeat in range(args.repeats):
                order = ("before", "after") if repeat % 2 == 0 else ("after", "before")
                for name, arguments in commands.items():
                    for side in order:
                        figures = timed(trees[side], arguments, scratch)
                        results["timings"][name][side].append(figures)
                        print(f"repeat {repeat + 1} {name:<6}{side:<7}"
                              f"{figures['wall_seconds']:8.1f}s wall{figures['cpu_seconds']:8.1f}s "
                              f"CPU  ({machine_text(machine())})", flush=True)  # fmt: skip
                results["summary"] = summarise(results)
                write_result(args.out, results, name="revisions")
        finally:
            for tree in trees.values():
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                    capture_output=True,
                )
    print(json.dumps(results["summary"], indent=2))
    print(report(results))


if __name__ == "__main__":
    main()
