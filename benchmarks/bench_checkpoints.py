"""A training run's evaluated checkpoints on the same test goals, each against the one it chose.

    python -m benchmarks checkpoints --run WORKSPACE/runs/NAME --goals 300 \
        --out docs/results/checkpoints.json

``skillrl train`` chooses its checkpoint on eval-split goals (``best.json``) and plays test goals
only for that choice. This benchmark asks whether the choice held: every cycle the run evaluated
(``eval.success_rate`` in ``metrics.jsonl``) that left a checkpoint, plus the run's starting
model when ``--starting-model`` names it, plays test goals 0..N-1, greedy, in float32, under the
checkpoint's recorded settings, with a fresh workspace seeded with the environment's starting
bank (the bank a user's workspace gets). Each cycle is compared with the chosen checkpoint goal
by goal (exact McNemar); the target is that no evaluated cycle beats the choice, resolved.

Each checkpoint takes about 20 minutes on 2 idle cores. Every finished one is kept in
``OUT.partial.json``; run the same command again and it plays only the checkpoints not kept yet.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    machine,
    machine_text,
    portable_arguments,
    provenance,
    run_text,
    write_result,
)

NAME = "checkpoints"


def evaluated_cycles(run: Path) -> dict[int, float]:
    """Cycle -> validation success, for every cycle the run evaluated."""
    from trainers.cycle.cycle_metrics import CycleMetrics

    cycles = {}
    with (run / "metrics.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            metrics = CycleMetrics.from_row(json.loads(line))
            if metrics.eval is not None:
                cycles[metrics.cycle] = float(metrics.eval.success_rate)
    return cycles


def play_test_goals(model: Path, run_config: dict, goals: int, threads: int):
    """One checkpoint on test goals 0..goals-1, as a new user's workspace plays it.

    Greedy, float32, under the checkpoint's recorded settings (its prompt budget) and the run's
    environment settings, turn cap and token budget, with a fresh workspace seeded with the
    environment's starting bank. Returns the evaluation's one arm (``EvalResult``).
    """
    from skillrl.policies import PolicyConfig
    from skillrl.policies.model_settings import ModelSettings
    from skillrl.prompts import PromptConfig
    from skillrl_cli.library import EvalSettings, evaluate_model
    from skillrl_core.goal_range import GoalRange
    from trainers.evaluate import EvalConfig

    recorded = ModelSettings.load(model)
    settings = EvalSettings(
        policy=PolicyConfig(
            backend="transformers",
            model=str(model),
            dtype="float32",
            threads=threads,
            workspace=Path(tempfile.mkdtemp(prefix="checkpoints-")),
        ),
        config=EvalConfig(goals=GoalRange(0, goals - 1)),
        env_id=run_config["env_id"],
        env_config=dict(run_config["env_config"]),
        arms=("on",),
        max_turns=run_config["max_turns"],
        max_new_tokens=run_config["max_new_tokens"],
        constrained=True,
        prompt=PromptConfig(max_prompt_tokens=recorded.max_prompt_tokens)
        if recorded
        else PromptConfig(),
    )
    return evaluate_model(settings).arms[0]


def main() -> None:
    from skillrl_core.files import atomic_write_json
    from skillrl_core.significance import discordant, mcnemar_exact

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a `skillrl train` run folder")
    parser.add_argument("--starting-model", default=None, help="the run's cycle-0 model")
    parser.add_argument("--cycles", default=None, help="comma-separated (default: every evaluated)")
    parser.add_argument("--goals", type=int, default=300, help="test goals 0..N-1")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", required=True, help="results JSON")
    args = parser.parse_args()
    run = Path(args.run)
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))["cycle"]
    best = json.loads((run / "best.json").read_text(encoding="utf-8"))
    chosen = int(best["cycle"])
    validation = evaluated_cycles(run)
    every = sorted(validation, reverse=True)
    wanted = [int(c) for c in args.cycles.split(",")] if args.cycles else every
    models = {}
    for cycle in wanted:
        folder = run / "checkpoints" / f"cycle-{cycle:04d}"
        if folder.is_dir():
            models[cycle] = folder
        elif cycle == 0 and args.starting_model:
            models[cycle] = Path(args.starting_model)
    if chosen not in models:
        parser.error(f"the chosen cycle {chosen} has no checkpoint under {run}/checkpoints")
    order = [chosen] + [c for c in models if c != chosen]
    results = {"provenance": provenance(NAME), "args": portable_arguments(vars(args))}
    results.update(
        chosen=chosen,
        validation={str(c): validation.get(c) for c in order},
        validation_goals=config["eval_goals"],
        machine_before=machine(),
    )
    partial = Path(f"{args.out}.partial.json")
    kept = json.loads(partial.read_text(encoding="utf-8")) if partial.is_file() else {}
    if kept.get("args") != results["args"]:  # another command's checkpoints: start afresh
        kept = {"args": results["args"], "cycles": {}}
    for cycle in order:
        if str(cycle) in kept["cycles"]:
            print(f"cycle {cycle}: kept from {partial.name}", flush=True)
            continue
        arm = play_test_goals(models[cycle], config, args.goals, args.threads)
        kept["cycles"][str(cycle)] = {"cycle": cycle, **arm.to_dict(), "machine": machine()}
        atomic_write_json(partial, kept)
        print(f"cycle {cycle}: {arm.greedy.success_rate:.3f}", flush=True)
    results["cycles"] = [kept["cycles"][str(c)] for c in order]
    chosen_row = results["cycles"][0]
    results["comparisons"] = []
    for row in results["cycles"][1:]:
        base = [o["success"] for o in chosen_row["outcomes"]]
        other = [o["success"] for o in row["outcomes"]]
        lost, won = discordant(base, other)
        results["comparisons"].append(
            {"cycle": row["cycle"], "won": won, "lost": lost, "p_value": mcnemar_exact(lost, won)}
        )
    results["machine_at_end"] = machine()
    write_result(Path(args.out), results, name=NAME)
    partial.unlink()  # every checkpoint is in the result now
    print(report(results))


def report(results: dict) -> str:
    """A results file as Markdown: each cycle's test figures beside its validation figure."""
    args = results["args"]
    goals = args["goals"]
    lines = [
        run_text(results),
        "",
        f"Test goals 0-{goals - 1}, greedy, float32, each checkpoint under its recorded settings "
        f"with the starting bank; validation: {results['validation_goals']} eval-split goals, as "
        f"the run measured them. Machine before: {machine_text(results['machine_before'])}.",
        "",
        "| cycle | validation | test success | 95% interval | mean score | vs the chosen "
        "(won / lost) | McNemar p | |",
        "| ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    comparisons = {c["cycle"]: c for c in results["comparisons"]}
    for row in results["cycles"]:
        greedy, cycle = row["greedy"], row["cycle"]
        solved = round(greedy["success_rate"] * greedy["episodes"])
        low, high = greedy["success_interval"]
        seen = results["validation"].get(str(cycle))
        seen_text = "-" if seen is None else f"{seen:.2f}"
        if cycle == results["chosen"]:
            versus, p_text, verdict = "(chosen)", "", ""
        else:
            c = comparisons[cycle]
            versus, p_text = f"{c['won']} / {c['lost']}", f"{c['p_value']:.3g}"
            if c["p_value"] >= 0.05:
                verdict = "not resolved"
            else:
                verdict = "resolved better" if c["won"] > c["lost"] else "resolved worse"
        lines.append(
            f"| {cycle} | {seen_text} | {solved}/{greedy['episodes']} | [{low:.2f}, {high:.2f}] "
            f"| {greedy['mean_score']:.3f} | {versus} | {p_text} | {verdict} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
