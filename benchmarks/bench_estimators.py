"""Update estimators from one starting policy, by training time, on the same test goals.

    python -m benchmarks estimators --model START --cycles 2 \
        --arm 'g: GRPO, turn-level credit=--estimator grpo --step-weight 1' \
        --arm 'm: GRPO + RFT (weight 1)=--estimator grpo --step-weight 1 --rft-weight 1' \
        --reference-run RFT_RUN --reference-checkpoints docs/results/checkpoints_rft.json \
        --start-outcomes docs/results/skill_value_rft.json:previous \
        --goals 300 --out docs/results/estimators.json

Each arm is the recipe (``--config``, the RFT recipe by default) from ``--model`` with the arm's
flags added, for ``--cycles`` cycles, in its own fresh workspace (``OUT_DIR/estimators-LETTER``),
with no evaluation between cycles (``--eval-goals 0 --test-goals 0``): the rollouts and updates
are what is compared. The arm's last checkpoint then plays test goals 0..N-1 as
``bench_checkpoints`` plays a checkpoint (greedy, float32, the starting bank, a fresh workspace).

The RFT arm is read, not played again: ``--reference-run`` is the recipe's own RFT run from the
same starting policy (its ``metrics.jsonl`` gives each cycle's rollout and update seconds; an
earlier ``estimators`` result that recorded them serves as well), and
``--reference-checkpoints`` is ``bench_checkpoints``'s result for that run (each evaluated
cycle's outcomes on the same test goals). ``--start-outcomes FILE:ARM`` names the starting
policy's own play of those goals (an arm of a ``bench_skill_value`` result). With fewer
``--goals`` than they played, each reference is paired on its first ``--goals`` outcomes. Every
arm is paired goal by goal (exact McNemar) with the start and with each RFT cycle.

Training time is each cycle's rollout plus update seconds, summed: the phases an estimator
changes. Distillation, bank upkeep and saving are the same work in every arm and are left out,
as is the evaluation the RFT run did between cycles.

An arm's training and its test play are kept as they finish (``OUT.partial.json`` and the arm's
run folder); run the same command again and it goes on where it stopped.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    machine,
    machine_text,
    portable_arguments,
    provenance,
    run_text,
    waiting_parent,
    write_result,
)

if TYPE_CHECKING:
    from trainers.update.update_record import UpdateRecord

NAME = "estimators"


ARM = re.compile(r"^\s*(?P<letter>[A-Za-z0-9]+)\s*:\s*(?P<name>.+?)\s*=(?P<flags>(?:\s*-.*)?)$")
"""``LETTER: NAME=FLAGS``: the name runs to the first ``=`` that the flags (or nothing) follow,
so a name may hold ``=`` (``w = 1``) and the flags may too (``--env-option k=v``)."""


def parse_arm(text: str) -> dict[str, str]:
    """``'LETTER: NAME=FLAGS'`` -> letter, name and flags."""
    match = ARM.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"--arm {text!r}: expected 'LETTER: NAME=FLAGS'")
    return {k: v.strip() for k, v in match.groupdict().items()}


def cycle_rows(run: Path) -> list[dict]:
    """Each trained cycle's seconds, training success and update figures, from ``metrics.jsonl``.

    The update figures say how far a cycle's update could move the policy: how many turns and
    generated tokens carried its loss, its optimizer steps, the mean ratio and clipped share,
    and the gradient norm.
    """
    from trainers.cycle.cycle_metrics import CycleMetrics
    from trainers.cycle.run_files import RunFiles

    files = RunFiles(run)
    rows = []
    with (run / "metrics.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            metrics = CycleMetrics.from_row(json.loads(line))
            if metrics.update is None:  # cycle 0 trains nothing
                continue
            step = metrics.update.step
            rows.append(
                {
                    "cycle": metrics.cycle,
                    "rollout_seconds": metrics.rollout.seconds,
                    "update_seconds": step.seconds,
                    "training_success": metrics.train.success_rate,
                    "samples": step.samples,
                    "completion_tokens": step.completion_tokens,
                    "optimizer_steps": step.optimizer_steps,
                    "ratio_mean": step.ratio_mean,
                    "clip_high_fraction": step.clip_high_fraction,
                    "grad_norm": step.grad_norm,
                    "policy_loss": step.policy_loss,
                    "groups_kept": metrics.groups.kept,
                    "groups_dropped": metrics.groups.dropped,
                    **advantage_figures(files.load_update_record(metrics.cycle)),
                }
            )
    return rows


def reference_rows_from(path: Path) -> list[dict]:
    """The RFT run's cycle rows: read from its run folder, or from an earlier ``estimators``
    result (its ``reference_cycles``), so the comparison needs no run folder kept on disk."""
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))["reference_cycles"]
    return cycle_rows(path)


def advantage_figures(record: UpdateRecord | None) -> dict:
    """What a cycle's update weighed its turns by (``advantages.json``, empty if absent).

    The turns the loss used, how many carried a nonzero advantage, and the summed positive and
    negative advantage: where the two nearly cancel on turns that share their tokens, the
    update moves the policy little whatever its step size.
    """
    if record is None:
        return {}
    used = [t.advantage for e in record.episodes for t in e.turns if not t.left_out]
    return {
        "turns_used": len(used),
        "turns_weighted": sum(1 for a in used if abs(a) > 1e-9),
        "advantage_positive": sum(a for a in used if a > 0),
        "advantage_negative": sum(a for a in used if a < 0),
    }


def training_seconds(rows: list[dict], up_to: int) -> float:
    """Rollout plus update seconds of cycles 1..up_to."""
    return sum(r["rollout_seconds"] + r["update_seconds"] for r in rows if r["cycle"] <= up_to)


def train_arm(arm: dict, args: argparse.Namespace, environment: dict[str, str]) -> Path:
    """Run (or finish) the arm's ``skillrl train``; return its run folder."""
    workspace = Path(args.out).parent / f"estimators-{arm['letter']}"
    run = workspace / "runs" / arm["letter"]
    state = run / "state.json"
    if state.is_file() and json.loads(state.read_text(encoding="utf-8")).get("done"):
        return run
    command = [
        sys.executable, "-m", "cli", "train", "--config", args.config, "--model", args.model,
        "--cycles", str(args.cycles), "--eval-goals", "0", "--test-goals", "0", "--patience", "0",
        "--no-compare-starting-bank", "--threads", str(args.threads),
        "--workspace", str(workspace), "--run-name", arm["letter"],
        *shlex.split(arm["flags"]),
    ]  # fmt: skip
    if state.is_file():
        command.append("--resume")
    print(f"arm {arm['letter']}: {shlex.join(command)}", flush=True)
    subprocess.run(command, check=True, env=environment)
    return run


def pair(base: list[dict], other: list[dict]) -> dict:
    """``other`` against ``base`` on the same goals: won, lost, exact McNemar p."""
    from skillrl_core.significance import discordant, mcnemar_exact

    if [o["goal_index"] for o in base] != [o["goal_index"] for o in other]:
        raise SystemExit("the arms did not play the same goals in the same order")
    lost, won = discordant([o["success"] for o in base], [o["success"] for o in other])
    return {"won": won, "lost": lost, "p_value": mcnemar_exact(lost, won)}


def start_outcomes(spec: str) -> list[dict]:
    """``FILE:ARM`` -> that ``bench_skill_value`` arm's per-goal outcomes."""
    path, _, arm = spec.rpartition(":")
    episodes = json.loads(Path(path).read_text(encoding="utf-8"))["episodes"][arm]
    return [
        {"goal_index": index, "success": bool(e["success"]), "score": e["score"]}
        for index, e in enumerate(episodes)
    ]


def main() -> None:
    environment = waiting_parent()
    from bench_checkpoints import play_test_goals

    from skillrl_core.files import atomic_write_json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="webshop-rft", help="the recipe every arm runs")
    parser.add_argument("--model", required=True, help="the starting policy of every arm")
    parser.add_argument("--arm", type=parse_arm, action="append", required=True)
    parser.add_argument("--cycles", type=int, default=2, help="cycles per arm")
    parser.add_argument("--goals", type=int, default=300, help="test goals 0..N-1")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--reference-run",
        required=True,
        help="the recipe's RFT run folder, or an earlier estimators result that recorded it",
    )
    parser.add_argument("--reference-checkpoints", required=True, help="its checkpoints result")
    parser.add_argument("--start-outcomes", required=True, help="FILE:ARM, the start's play")
    parser.add_argument("--out", required=True, help="results JSON")
    args = parser.parse_args()

    results = {"provenance": provenance(NAME), "args": portable_arguments(vars(args))}
    results["machine_before"] = machine()
    partial = Path(f"{args.out}.partial.json")
    kept = json.loads(partial.read_text(encoding="utf-8")) if partial.is_file() else {}
    # Arms are kept by their whole spec, so the same command with arms added or left out keeps
    # the arms it finished; any other setting changed starts afresh.
    settings = {k: v for k, v in results["args"].items() if k != "arm"}
    if kept.get("settings") != settings:
        kept = {"settings": settings, "arms": {}}
    for arm in args.arm:
        if kept["arms"].get(arm["letter"], {}).get("flags") == arm["flags"]:
            print(f"arm {arm['letter']}: kept from {partial.name}", flush=True)
            continue
        run = train_arm(arm, args, environment)
        config = json.loads((run / "config.json").read_text(encoding="utf-8"))["cycle"]
        rows = cycle_rows(run)
        trained_machine = machine()
        played = play_test_goals(
            run / "checkpoints" / f"cycle-{args.cycles:04d}", config, args.goals, args.threads
        )
        kept["arms"][arm["letter"]] = {
            **arm,
            "cycles": rows,
            "training_seconds": training_seconds(rows, args.cycles),
            "machine_after_training": trained_machine,
            "test": played.to_dict(),
            "machine": machine(),
        }
        atomic_write_json(partial, kept)
        print(f"arm {arm['letter']}: {played.greedy.success_rate:.3f}", flush=True)

    reference_rows = reference_rows_from(Path(args.reference_run))
    checkpoints = json.loads(Path(args.reference_checkpoints).read_text(encoding="utf-8"))
    references = [
        {
            "label": "start",
            "cycle": 0,
            "training_seconds": 0.0,
            "outcomes": start_outcomes(args.start_outcomes)[: args.goals],
        }
    ]
    for row in sorted(checkpoints["cycles"], key=lambda r: r["cycle"]):
        references.append(
            {
                "label": f"RFT cycle {row['cycle']}",
                "cycle": row["cycle"],
                "training_seconds": training_seconds(reference_rows, row["cycle"]),
                "greedy": row["greedy"],
                "outcomes": [
                    {"goal_index": o["goal_index"], "success": o["success"], "score": o["score"]}
                    for o in row["outcomes"][: args.goals]
                ],
                "machine": row.get("machine"),
            }
        )
    results["reference_cycles"] = reference_rows
    results["references"] = references
    results["arms"] = [kept["arms"][arm["letter"]] for arm in args.arm]
    results["comparisons"] = [
        {
            "arm": arm["letter"],
            "against": reference["label"],
            **pair(reference["outcomes"], arm["test"]["outcomes"]),
        }
        for arm in results["arms"]
        for reference in references
    ]
    results["machine_at_end"] = machine()
    write_result(Path(args.out), results, name=NAME)
    partial.unlink()
    print(report(results))


def _masses(row: dict) -> str:
    if "advantage_positive" not in row:
        return "-"
    return f"{row['advantage_positive']:.0f} / {row['advantage_negative']:.0f}"


def _solved(outcomes: list[dict]) -> int:
    return sum(bool(o["success"]) for o in outcomes)


def report(results: dict) -> str:
    """A results file as Markdown: training time, test success and the paired tests."""
    from trainers.common.episode_metrics import wilson_interval

    goals = results["args"]["goals"]
    lines = [
        run_text(results),
        "",
        f"Test goals 0-{goals - 1}, greedy, float32, each policy with the starting bank in a "
        "fresh workspace. Training time: rollout plus update seconds of the cycles trained. "
        f"Machine before: {machine_text(results['machine_before'])}.",
        "",
        "| policy | cycles | training minutes | training success per cycle | test success "
        "| 95% interval | vs start (won / lost, p) |",
        "| --- | ---: | ---: | --- | ---: | --- | --- |",
    ]
    versus = {(c["arm"], c["against"]): c for c in results["comparisons"]}
    start = next(r for r in results["references"] if r["label"] == "start")
    for reference in results["references"]:
        solved, n = _solved(reference["outcomes"]), len(reference["outcomes"])
        low, high = wilson_interval(solved, n)
        if reference["label"] == "start":
            trained, vs_start = "-", "-"
        else:
            rows = [r for r in results["reference_cycles"] if r["cycle"] <= reference["cycle"]]
            trained = ", ".join(f"{r['training_success']:.0%}" for r in rows)
            c = pair(start["outcomes"], reference["outcomes"])
            vs_start = f"{c['won']} / {c['lost']}, {c['p_value']:.2g}"
        lines.append(
            f"| {reference['label']} | {reference['cycle']} | "
            f"{reference['training_seconds'] / 60:.1f} | {trained} | {solved}/{n} | "
            f"[{low:.2f}, {high:.2f}] | {vs_start} |"
        )
    for arm in results["arms"]:
        outcomes = arm["test"]["outcomes"]
        solved, n = _solved(outcomes), len(outcomes)
        low, high = wilson_interval(solved, n)
        c = versus[(arm["letter"], "start")]
        trained = ", ".join(f"{r['training_success']:.0%}" for r in arm["cycles"])
        lines.append(
            f"| {arm['letter']}: {arm['name']} | {len(arm['cycles'])} | "
            f"{arm['training_seconds'] / 60:.1f} | {trained} | {solved}/{n} | "
            f"[{low:.2f}, {high:.2f}] | {c['won']} / {c['lost']}, {c['p_value']:.2g} |"
        )
    trained = [
        f"{a['letter']}: {machine_text(a['machine_after_training'])}"
        for a in results["arms"]
        if "machine_after_training" in a
    ]
    if trained:
        lines += ["", f"Machine when each arm's training ended: {'; '.join(trained)}."]
    lines += [
        "",
        "| arm | against | won / lost | McNemar p | |",
        "| --- | --- | ---: | ---: | --- |",
    ]
    for c in results["comparisons"]:
        if c["against"] == "start":
            continue
        verdict = "not resolved"
        if c["p_value"] < 0.05:
            verdict = "resolved better" if c["won"] > c["lost"] else "resolved worse"
        lines.append(
            f"| {c['arm']} | {c['against']} | {c['won']} / {c['lost']} | {c['p_value']:.3g} "
            f"| {verdict} |"
        )
    lines += [
        "",
        "| arm | cycle | samples | completion tokens | turns weighted | advantage + / - "
        "| optimizer steps | mean ratio | clipped high | grad norm |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    every = [("RFT", r) for r in results["reference_cycles"]]
    every += [(a["letter"], r) for a in results["arms"] for r in a["cycles"]]
    for label, r in every:
        lines.append(
            f"| {label} | {r['cycle']} | {r['samples']} | {r['completion_tokens']} "
            f"| {r.get('turns_weighted', '-')} | {_masses(r)} | {r['optimizer_steps']} "
            f"| {r['ratio_mean']:.4f} | {r['clip_high_fraction']:.4f} | {r['grad_norm']:.4f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
