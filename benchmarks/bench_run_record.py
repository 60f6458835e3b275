"""A finished `skillrl train` run's own figures, kept as a result file and rendered.

    python -m benchmarks run_record --run WORKSPACE/runs/NAME --command "skillrl train ..." \
        --out docs/results/run_NAME.json

A training run measures itself: every cycle's row in ``metrics.jsonl`` (training rollouts, the
update, the evaluation goals when the cycle was evaluated) and, in ``best.json``, the cycle it
chose on its evaluation goals and, with ``--test-goals``, that cycle against cycle 0 on the same
test goals, goal by goal (exact McNemar). This copies those figures, with the command that made
the run, into a result file that ``docs/results.md`` renders, so a run's claim is read from what
it wrote and not typed again. It plays nothing; the machine figures are this process's, taken
when the record is made (the run's wall minutes are its own ``cycle.seconds``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import portable_command, provenance, run_text, write_result  # noqa: E402

from trainers.common.episode_metrics import wilson_interval  # noqa: E402
from trainers.cycle.cycle_metrics import (  # noqa: E402
    CYCLE_SECONDS,
    EVAL_EPISODES,
    EVAL_MEAN_SCORE,
    EVAL_SUCCESS_RATE,
    TRAIN_SUCCESS_RATE,
)


def read_run(folder: Path) -> tuple[list[dict], dict | None]:
    """The run's metric rows and its ``best.json`` (None: it chose no cycle)."""
    metrics = folder / "metrics.jsonl"
    if not metrics.is_file():
        raise SystemExit(f"--run {folder}: no metrics.jsonl (not a skillrl train run folder?)")
    rows = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line]
    # A row names its checkpoint by this machine's path: kept portable, as every result is.
    rows = [
        {k: portable_command(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows
    ]
    best = folder / "best.json"
    return rows, (json.loads(best.read_text(encoding="utf-8")) if best.is_file() else None)


def report(results: dict) -> str:
    """A run record as Markdown: one row per cycle, then the chosen cycle's test pairing."""
    choice = results["choice"]
    chosen = choice["cycle"] if choice else None
    lines = [
        run_text(results),
        "",
        f"The run: `{results['run_command']}`, {results['wall_minutes']:.1f} minutes of wall "
        "time over its cycles.",
        "",
        "| cycle | evaluation success | mean score | training success (sampled) | cycle minutes |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in results["history"]:
        cycle = row["cycle"]
        if EVAL_SUCCESS_RATE in row:
            n = int(row[EVAL_EPISODES])
            won = round(row[EVAL_SUCCESS_RATE] * n)
            mark = " (chosen)" if cycle == chosen else ""
            evaluated = f"{won}/{n}{mark} | {row[EVAL_MEAN_SCORE]:.3f}"
        else:
            evaluated = "not evaluated | "
        train = row.get(TRAIN_SUCCESS_RATE)
        sampled = "-" if train is None else f"{train:.0%}"
        minutes = row.get(CYCLE_SECONDS, 0.0) / 60
        lines.append(f"| {cycle} | {evaluated} | {sampled} | {minutes:.1f} |")
    if choice:
        lines += ["", f"Chosen on {choice['evaluation_split']}-split goals: cycle {chosen}."]
        if choice.get("stopped_early_after") is not None:
            lines[-1] += f" Stopped early after cycle {choice['stopped_early_after']}."
    test = choice.get("test") if choice else None
    if test:
        n = test["goals"]
        low, high = wilson_interval(test["chosen_successes"], n)
        verdict = "resolved" if test["p_value"] < 0.05 else "not resolved"
        lines += [
            "",
            "| test goals | cycle 0 | chosen cycle | 95% interval (chosen) | won / lost | "
            "McNemar p | mean score (0 -> chosen) | |",
            "| ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |",
            f"| {n} | {test['start_successes']} | {test['chosen_successes']} | "
            f"[{low:.2f}, {high:.2f}] | {test['won']} / {test['lost']} | {test['p_value']:.3g} | "
            f"{test['start_mean_score']:.3f} -> {test['chosen_mean_score']:.3f} | {verdict} |",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, type=Path, help="a `skillrl train` run folder")
    parser.add_argument("--command", required=True, help="the command that made the run")
    parser.add_argument("--out", required=True, help="results JSON")
    args = parser.parse_args()
    rows, choice = read_run(args.run)
    results = {
        "provenance": provenance("run_record"),
        "run_command": portable_command(args.command),
        "wall_minutes": sum(row.get(CYCLE_SECONDS, 0.0) for row in rows) / 60,
        "history": rows,
        "choice": choice,
    }
    write_result(args.out, results, name="run_record")
    print(report(results))


if __name__ == "__main__":
    main()
