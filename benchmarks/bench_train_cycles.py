"""Training evidence: does a cycle of skills + turn-level GRPO beat plain GRPO and no skills?

Run: python benchmarks/bench_train_cycles.py [--model embedded] [--env webshop] [--cycles 1]
     [--constrained] [--lora] [--only a]   (configurations can run as separate processes; the
     table includes every configuration whose workspace under --out already holds metrics)

``--config FILE`` runs one arm instead: ``skillrl train --config FILE`` (a recipe such as
``configs/webshop-rft.yaml``) in its own workspace, every setting from the file; the table's
settings are read back from the options the run saved. ``--recipe-arm "b: bf16
rollouts=--rollout-dtype bfloat16"`` (repeatable) adds an arm that runs the same recipe with
those flags, in its own workspace (``<out>/b``), paired goal by goal with the recipe's. On
WebShop the scripted "first result + goal options" policy plays the same test goals as a second
reference, paired with each arm's evaluated cycles.

From a cold-started policy: ``--model`` = the policy cold-started with skills (for a
and b), ``--no-skills-model`` = the one cold-started without (for c; a policy trained without
skills is run without). ``--plot`` writes every configuration's curve (success and score per
cycle, cycle 0 = the starting policy) into one PNG.

Three ``skillrl train`` runs of the embedded SmolLM2-135M-Instruct, each in its own fresh
workspace (its own bank, seeded with the shipped starting bank), same seed, same training and
evaluation goals:

  (a) skills + turn-level GRPO (w = 1)      (b) skills + plain GRPO (w = 0)
  (c) no skills + GRPO (w = 1)

For each: evaluation success and score at cycle 0 (the starting point: the baseline, measured in
the same run) and after the last cycle, then goal-by-goal comparisons (each last cycle against
its cycle 0, and the configurations against each other). The scripted expert on the same
evaluation goals and turn limit is the ceiling. Sized for a 2-core CPU: the figures are
small-sample and noisy.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import (
    machine,
    machine_text,
    portable_command,
    provenance,
    run_text,
    waiting_parent,
    write_result,
)

from trainers.cycle.cycle_metrics import (
    CYCLE_SECONDS,
    EVAL_MEAN_SCORE,
    EVAL_SUCCESS_RATE,
    GROUPS_DROPPED,
    GROUPS_KEPT,
    TRAIN_SUCCESS_RATE,
    UPDATE_STEP_GROUPS_SHARED,
)

CONFIGS = {
    "a: skills + turn-level GRPO (w=1)": ["--skills", "--step-weight", "1.0"],
    "b: skills + plain GRPO (w=0)": ["--skills", "--step-weight", "0.0"],
    "c: no skills + GRPO (w=1)": ["--no-skills", "--step-weight", "1.0"],
    "d: no skills + plain GRPO (w=0)": ["--no-skills", "--step-weight", "0.0"],
}


def train(name: str, flags: list[str], args: argparse.Namespace, root: Path) -> list[dict]:
    """Run one configuration a cycle at a time until ``--cycles`` or ``--minutes`` is reached.

    Each call of ``skillrl train`` adds one cycle to the resumable run (``--resume``, only
    ``--cycles`` grows), so an arm stops at a cycle boundary once its wall-time budget is spent:
    arms run side by side are compared at equal wall time. The wall time at the end of every
    cycle goes to ``<workspace>/cycle_seconds.json`` (a resumed arm adds to what it spent; the
    first call plays cycle 0 and cycle 1, so both carry its end time).
    """
    workspace = root / name.split(":")[0]
    clock = workspace / "cycle_seconds.json"
    if args.eval_every > 1:
        return _train_in_one_call(name, flags, args, workspace)
    spent = json.loads(clock.read_text()) if clock.exists() else {}
    rows = _metrics(workspace)
    done = max((row["cycle"] for row in rows), default=-1)
    while done < args.cycles:
        elapsed = max(spent.values(), default=0.0)
        if done >= 0 and args.minutes and elapsed >= 60 * args.minutes:
            print(f"[{name}] wall-time budget spent after cycle {done}", flush=True)
            break
        started = time.perf_counter()
        _run_child(_train_command(name, flags, args, workspace, max(done + 1, 1)), args)
        rows = _metrics(workspace)
        for row in rows:
            if str(row["cycle"]) not in spent:
                spent[str(row["cycle"])] = elapsed + time.perf_counter() - started
        workspace.mkdir(parents=True, exist_ok=True)
        clock.write_text(json.dumps(spent, indent=1))
        done = max(row["cycle"] for row in rows)
        print(f"[{name}] cycle {done} at {spent[str(done)]:.0f} s", flush=True)
    return _with_wall_seconds(workspace)


def _run_child(command: list[str], args: argparse.Namespace) -> None:
    """Run one ``skillrl train`` call with the environment this process started with."""
    subprocess.run(command, check=True, env=getattr(args, "child_environment", None))


def _train_in_one_call(
    name: str, flags: list[str], args: argparse.Namespace, workspace: Path
) -> list[dict]:
    """Run every cycle in one ``skillrl train`` call (``--resume`` continues a killed one).

    With ``--eval-every`` above 1 the run must know its last cycle from the start (the last
    cycle is always evaluated), so it cannot grow a cycle at a time. The arm's wall time at the
    end of each cycle is the running sum of the rows' ``cycle.seconds``.
    """
    _run_child(_train_command(name, flags, args, workspace, args.cycles), args)
    return _summed_wall_seconds(workspace)


def _summed_wall_seconds(workspace: Path) -> list[dict]:
    """The rows of a run made in one call: its wall time at each cycle's end is the running sum
    of the rows' ``cycle.seconds`` (saved to ``cycle_seconds.json``)."""
    spent, total = {}, 0.0
    for row in _metrics(workspace):
        total += row.get(CYCLE_SECONDS, 0.0)
        spent[str(row["cycle"])] = total
    (workspace / "cycle_seconds.json").write_text(json.dumps(spent, indent=1))
    return _with_wall_seconds(workspace)


def _with_wall_seconds(workspace: Path) -> list[dict]:
    """The arm's metrics rows, each with the wall time its arm had spent at its end."""
    clock = workspace / "cycle_seconds.json"
    spent = json.loads(clock.read_text()) if clock.exists() else {}
    rows = _metrics(workspace)
    for row in rows:
        row["bench.wall_seconds"] = spent.get(str(row["cycle"]))
    return rows


RECIPE_ARM = "r: recipe"
"""The name of the ``--config`` arm (its workspace is ``<out>/r``)."""


def recipe_arm(text: str) -> tuple[str, list[str]]:
    """``"b: bf16 rollouts=--rollout-dtype bfloat16"`` -> (arm name, extra flags)."""
    name, sep, flags = text.partition("=")
    letter = name.split(":")[0].strip()
    if not sep or len(letter) != 1 or not letter.isalpha() or ":" not in name or letter == "r":
        raise argparse.ArgumentTypeError(
            f"{text!r}: a recipe arm is 'LETTER: NAME=FLAGS' with a letter other than r"
        )
    return name.strip(), flags.split()


def train_recipe(
    args: argparse.Namespace, root: Path, name: str = RECIPE_ARM, flags: Sequence[str] = ()
) -> list[dict]:
    """Run the ``--config`` recipe (with ``flags``) in one ``skillrl train`` call.

    The arm's workspace is ``<out>/<letter>``; a run already started there is resumed, and a
    finished one is summarised, not run again.
    """
    workspace = root / name.split(":")[0]
    command = [sys.executable, "-m", "cli", "train", "--config", args.config, "--workspace",
               str(workspace), "--run-name", "bench", "--threads", str(args.threads)]  # fmt: skip
    command += test_curve_flags(args.config) + list(flags)
    if args.cycles is not None:
        command += ["--cycles", str(args.cycles)]
    done = max((row["cycle"] for row in _metrics(workspace)), default=-1)
    if (workspace / "runs" / "bench" / "state.json").exists():
        command.append("--resume")
    saved = workspace / "runs" / "bench" / "config.json"
    recorded = json.loads(saved.read_text())["cycle"]["cycles"] if saved.exists() else 0
    if done < (args.cycles or recorded):  # a finished run is summarised, not resumed
        _run_child(command, args)
    return _summed_wall_seconds(workspace)


def test_curve_flags(config: str) -> list[str]:
    """Return the flags that make a recipe's run evaluate test goals at every evaluated cycle.

    A recipe that chooses its checkpoint on eval-split goals (``eval-split: eval``) plays test
    goals only at cycle 0 and for the chosen cycle. This benchmark draws the whole learning
    curve on the recipe's test goals instead; it chooses nothing on them (every evaluated cycle
    is reported), so the run is told to evaluate test goals, choose nothing and never stop early.
    """
    import yaml

    from skillrl_cli.train_config import RECIPES

    path = Path(config)
    if not path.exists():  # a recipe shipped with skillrl, by name
        path = RECIPES / f"{config}.yaml"
    recipe = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if recipe.get("eval-split", "test") == "test":
        return []
    goals = recipe.get("test-goals") or recipe.get("eval-goals")
    return ["--eval-split", "test", "--eval-goals", str(goals), "--test-goals", "0",
            "--patience", "0"]  # fmt: skip


def recipe_settings(args: argparse.Namespace, root: Path) -> None:
    """Set the table's settings in ``args`` from the options the recipe's run saved."""
    saved = json.loads((root / "r" / "runs" / "bench" / "config.json").read_text())
    options, cycle = saved["options"], saved["cycle"]
    args.cycles, args.eval_goals, args.max_turns = (
        cycle["cycles"],
        cycle["eval_goals"],
        cycle["max_turns"],
    )
    args.goals, args.group_size = cycle["goals_per_cycle"], cycle["group_size"]
    grpo = saved["grpo"]
    args.lr, args.lora = grpo["learning_rate"], grpo["use_peft"]
    args.temperature, args.env = grpo["temperature"], cycle["env_id"]
    args.estimator = grpo.get("estimator", "grpo")
    args.constrained = options.get("constrained", True) is not False
    args.env_option = [f"{k}={v}" for k, v in cycle.get("env_config", {}).items()]


def first_result_with_options(args: argparse.Namespace) -> list[Any]:
    """Episodes of the scripted "first result + goal options" policy on the test goals."""
    from bench_expert import FirstResultWithOptions

    import envs
    from skillrl_core.records import EpisodeRecord

    env = envs.make("webshop", **{**env_options(args.env_option), "max_turns": args.max_turns})
    episodes = []
    for index in range(args.eval_goals):
        obs, info = env.reset(seed=index, options={"split": "test", "goal_index": index})
        policy = FirstResultWithOptions()
        policy.reset(info)
        record = EpisodeRecord("webshop", str(info["goal_id"]), info["instruction"],
                               str(info.get("category", "")), split="test")  # fmt: skip
        while True:
            obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
            if terminated or truncated:
                break
        record.success, record.score = bool(info["success"]), float(reward)
        episodes.append(record)
    return episodes


def _metrics(workspace: Path) -> list[dict]:
    path = workspace / "runs" / "bench" / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _train_command(
    name: str, flags: list[str], args: argparse.Namespace, workspace: Path, cycles: int
) -> list[str]:
    model = args.no_skills_model if "--no-skills" in flags and args.no_skills_model else args.model
    command = [
        sys.executable,
        "-m",
        "cli",
        "train",
        "--env",
        args.env,
        "--workspace",
        str(workspace),
        "--model",
        model,
        "--cycles",
        str(cycles),
        "--temperature",
        str(args.temperature),
        "--goals-per-cycle",
        str(args.goals),
        "--group-size",
        str(args.group_size),
        "--eval-goals",
        str(args.eval_goals),
        "--eval-every",
        str(args.eval_every),
        "--max-turns",
        str(args.max_turns),
        "--max-new-tokens",
        str(args.max_new_tokens),
        "--learning-rate",
        str(args.lr),
        "--seed",
        str(args.seed),
        "--run-name",
        "bench",
        "--threads",
        str(args.threads),
        "--max-topup-rounds",
        str(args.max_topup_rounds),
        "--validation-goals",
        str(args.validation_goals),
        "--max-prompt-tokens",
        str(args.max_prompt_tokens),
        "--constrained" if args.constrained else "--free",
        "--lora" if args.lora else "--full",
        *flags,
        *(f"--env-option={option}" for option in args.env_option),
    ]
    if (workspace / "runs" / "bench" / "state.json").exists():
        command.append("--resume")
    return command


def report(summary: dict) -> str:
    """A summary file as Markdown: every arm's cycles, then the goal-by-goal comparisons."""
    from trainers.common.episode_metrics import wilson_interval

    args = summary["args"]
    m = summary.get("machine_at_summary", {})
    # Summaries written before provenance was kept carry their command alone.
    header = (
        run_text(summary)
        if "provenance" in summary
        else f"`{portable_command(summary.get('command', ''))}`"
    )
    lines = [
        header,
        "",
        f"{args['eval_goals']} {args.get('env', 'webshop')} test goals, greedy, "
        f"{args['max_turns']}-turn cap; "
        f"{args['goals']} training goals x G = {args['group_size']} per cycle, sampled at "
        f"T = {args.get('temperature', 1.0)}; {args.get('estimator', 'grpo').upper()} update, "
        f"lr {args['lr']}, "
        f"{'LoRA' if args['lora'] else 'full fine-tuning'}, {args['threads']} thread(s) per arm. "
        f"Machine when summarised: {m.get('matmul_gflops', '?')} GFLOP/s, "
        f"load {m.get('load_average', 0):.1f}.",
        "",
        "| arm | cycle | test success | 95% interval | test score | training success "
        "| groups kept / dropped | step groups shared | wall minutes |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    n = args["eval_goals"]
    for name, rows in summary["results"].items():
        for row in rows:
            evaluated = EVAL_SUCCESS_RATE in row  # --eval-every leaves cycles out
            wins = round(row[EVAL_SUCCESS_RATE] * n) if evaluated else 0
            low, high = wilson_interval(wins, n)
            train = row.get(TRAIN_SUCCESS_RATE)
            kept = row.get(GROUPS_KEPT)
            groups = "" if kept is None else f"{kept} / {row.get(GROUPS_DROPPED, 0)}"
            # The first call plays cycles 0 and 1: cycle 0 has no wall time of its own.
            wall = row.get("bench.wall_seconds") if row["cycle"] > 0 else None
            lines.append(
                f"| {name} | {row['cycle']} "
                + (
                    f"| {wins}/{n} | [{low:.2f}, {high:.2f}] | {row[EVAL_MEAN_SCORE]:.3f} "
                    if evaluated
                    else "| not evaluated | | "
                )
                + f"| {'' if train is None else f'{train:.0%}'} "
                f"| {groups} "
                f"| {row.get(UPDATE_STEP_GROUPS_SHARED, '')} "
                f"| {'' if wall is None else f'{wall / 60:.1f}'} |"
            )
    expert = summary["expert"]
    lines += [
        f"| expert (scripted) | | {round(expert['success_rate'] * n)}/{n} | | "
        f"{expert['mean_score']:.3f} | | | | |",
    ]
    if summary.get("scripted"):
        row = summary["scripted"]
        low, high = wilson_interval(row["successes"], n)
        lines.append(
            f"| first result + goal options (scripted) | | {row['successes']}/{n} "
            f"| [{low:.2f}, {high:.2f}] | {row['mean_score']:.3f} | | | | |"
        )
    lines += [
        "",
        "| comparison (same goals) | success | goals lost / won | McNemar p | score difference |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for r in summary["paired"]:
        (first, c1), (second, c2) = r["before"], r["after"]
        lines.append(
            f"| {_side(first, c1)} -> {_side(second, c2)} "
            f"| {r['successes_before']} -> {r['successes_after']} | {r['lost']} / {r['won']} "
            f"| {_p_value(r['mcnemar_p'])} | {r['score_difference']:+.3f} +- "
            f"{r['score_half_width']:.3f} |"
        )
    return "\n".join(lines)


def _p_value(p: float) -> str:
    """A p-value to three places, or in scientific notation when that would read 0.000."""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _side(name: str, cycle: int) -> str:
    """One side of a comparison: an arm's letter and cycle, or the scripted policy."""
    return "scripted" if name == SCRIPTED else f"{name.split(':')[0]} c{cycle}"


def env_options(pairs: list[str]) -> dict:
    """``KEY=VALUE`` environment options, read as the CLI's ``--env-option`` reads them."""
    import click

    from skillrl_cli.options import parse_env_options

    try:
        return parse_env_options(pairs)
    except click.BadParameter as error:
        raise SystemExit(f"--env-option: {error.message}") from error


def expert_ceiling(args: argparse.Namespace) -> tuple[float, float]:
    from skillrl.agents.expert import ExpertAgent
    from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine

    starts = [
        EpisodeStart(
            args.env,
            split="test",
            goal_index=i,
            seed=args.seed + i,
            env_config={**env_options(args.env_option), "max_turns": args.max_turns},
        )
        for i in range(args.eval_goals)
    ]
    engine = RolloutEngine(
        ExpertAgent(max_turns=args.max_turns), config=RolloutConfig(max_turns=args.max_turns)
    )
    episodes = engine.run(starts)
    n = len(episodes)
    return sum(e.success for e in episodes) / n, sum(e.score for e in episodes) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default="embedded", help="Starting model, as `skillrl train --model` takes it."
    )
    parser.add_argument("--env", default="webshop", help="Environment id.")
    parser.add_argument("--out", default="benchmarks/out/train_cycles", help="Workspaces root.")
    parser.add_argument(
        "--cycles",
        type=int,
        default=None,
        help="Cycles per arm (default 1); with --config, the recipe's unless given here.",
    )
    parser.add_argument("--goals", type=int, default=2, help="Training goals per cycle.")
    parser.add_argument("--group-size", type=int, default=3)
    parser.add_argument("--eval-goals", type=int, default=4)
    parser.add_argument(
        "--eval-every",
        type=int,
        default=1,
        help="Evaluate every N-th cycle (cycle 0 and the last always); above 1 each arm runs "
        "all its cycles in one call, so --minutes cannot stop it early.",
    )
    parser.add_argument("--max-turns", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--max-topup-rounds", type=int, default=3)
    parser.add_argument(
        "--validation-goals",
        type=int,
        default=8,
        help="Goals of the eval split whose failures evolve the bank (never the test goals).",
    )
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-prompt-tokens", type=int, default=512)
    parser.add_argument("--constrained", action="store_true", help="Constrained decoding.")
    parser.add_argument("--lora", action="store_true", help="LoRA instead of full fine-tuning.")
    parser.add_argument("--only", default="abc", help="Which configurations to run (letters).")
    parser.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="Wall-time budget per configuration: no cycle starts after it is spent.",
    )
    parser.add_argument(
        "--temperature", type=float, default=1.0, help="Sampling temperature of training rollouts."
    )
    parser.add_argument(
        "--env-option",
        action="append",
        default=[],
        help="KEY=VALUE environment setting for every configuration (repeatable).",
    )
    parser.add_argument(
        "--no-skills-model", default=None, help="Starting checkpoint of c (default: --model)."
    )
    parser.add_argument("--plot", default=None, help="PNG of every configuration's curve.")
    parser.add_argument(
        "--config",
        default=None,
        help="Run this `skillrl train --config` recipe as the only arm (its settings replace "
        "the flags above, but --out, --threads and --plot).",
    )
    parser.add_argument(
        "--recipe-arm",
        type=recipe_arm,
        action="append",
        default=[],
        help="With --config: 'LETTER: NAME=FLAGS', another arm that runs the recipe with FLAGS "
        "added (repeatable), e.g. 'b: bf16 rollouts=--rollout-dtype bfloat16'.",
    )
    args = parser.parse_args()
    # This process measures and waits; each arm's `skillrl train` gets the environment it
    # started with (before anything here imports torch).
    args.child_environment = waiting_parent()
    if args.cycles is None and not args.config:
        args.cycles = 1
    if args.eval_every > 1 and args.minutes:
        parser.error(
            "--minutes needs --eval-every 1: an arm that grows a cycle at a time "
            "evaluates every cycle it ends on"
        )
    run = provenance("train_cycles")
    root = Path(args.out)
    results = {}
    if args.recipe_arm and not args.config:
        parser.error("--recipe-arm needs --config")
    if args.config:
        results[RECIPE_ARM] = train_recipe(args, root)
        recipe_settings(args, root)
        for name, flags in args.recipe_arm:
            results[name] = train_recipe(args, root, name, flags)
    for name, flags in CONFIGS.items() if not args.config else ():
        metrics = root / name.split(":")[0] / "runs" / "bench" / "metrics.jsonl"
        if name[0] in args.only:
            results[name] = train(name, flags, args, root)
        elif metrics.exists():  # run earlier, or by another process: report it too
            results[name] = _with_wall_seconds(root / name.split(":")[0])
    success, score = expert_ceiling(args)
    scripted = first_result_with_options(args) if args.env == "webshop" else []
    at_summary = machine()
    print(
        f"\n{args.eval_goals} test goals, max {args.max_turns} turns, {args.cycles} cycle(s) of "
        f"{args.goals} goals x G={args.group_size}, lr {args.lr}, "
        f"{'constrained' if args.constrained else 'free'} decoding, "
        f"{'LoRA' if args.lora else 'full fine-tuning'}"
    )
    print(
        f"{'configuration':38s} {'success c0':>10s} {'success end':>11s} "
        f"{'score c0':>9s} {'score end':>9s} {'delta succ':>10s}"
    )
    for name, rows in results.items():
        first, last = rows[0], rows[-1]
        s0, s1 = first[EVAL_SUCCESS_RATE], last[EVAL_SUCCESS_RATE]
        print(
            f"{name:38s} {s0:10.2f} {s1:11.2f} {first[EVAL_MEAN_SCORE]:9.3f} "
            f"{last[EVAL_MEAN_SCORE]:9.3f} {100 * (s1 - s0):+9.0f}pt"
        )
    print(f"{'expert ceiling (scripted)':38s} {success:10.2f} {'':11s} {score:9.3f}")
    print(
        f"machine at start: {machine_text(run['machine_at_start'])}; "
        f"at the summary: {machine_text(at_summary)}"
    )
    summary = {
        "provenance": run,
        "command": run["command"],
        "machine_at_summary": at_summary,
        "results": results,
        "expert": {"success_rate": success, "mean_score": score},
        "scripted": {
            "successes": sum(e.success for e in scripted),
            "mean_score": sum(e.score for e in scripted) / len(scripted),
        }
        if scripted
        else None,
        "paired": paired_report(root, results, scripted),
        "args": {k: v for k, v in vars(args).items() if k != "child_environment"},
    }
    write_result(root / "summary.json", summary, name="train_cycles")
    if args.plot:
        plot(results, Path(args.plot), args)


SCRIPTED = "s: first result + goal options (scripted)"


def paired_report(
    root: Path, results: dict[str, list[dict]], scripted: list[Any] | None = None
) -> list[dict]:
    """Goal-by-goal comparisons on the same test goals; printed, and returned for the summary.

    Each configuration's evaluated cycles against its own cycle 0 and against the evaluated
    cycle before them, every two configurations at their last cycle, and the scripted policy
    against each evaluated cycle: success by the exact McNemar test (goals lost / won), score by
    the 95% interval of the mean per-goal difference. Far smaller differences are resolved this
    way than by comparing two independent success intervals.
    """
    from dataclasses import asdict

    from trainers.common.episode_metrics import compare_paired
    from trainers.cycle.run_files import RunFiles

    def evaluation(name: str, cycle: int) -> list:
        files = RunFiles(root / name.split(":")[0] / "runs" / "bench")
        data = files.load_episodes(cycle, "eval")
        return data["episodes"] if data else []

    def evaluated(rows: list[dict]) -> list[int]:
        return [row["cycle"] for row in rows if EVAL_SUCCESS_RATE in row and row["cycle"] > 0]

    pairs = []
    for name, rows in results.items():
        later = evaluated(rows)
        pairs += [(name, 0, name, c) for c in later]
        pairs += [(name, a, name, b) for a, b in zip(later, later[1:], strict=False)]
    names = list(results)
    pairs += [
        (x, len(results[x]) - 1, y, len(results[y]) - 1)
        for i, x in enumerate(names)
        for y in names[i + 1 :]
    ]
    if scripted:
        pairs += [(SCRIPTED, 0, name, c) for name, rows in results.items() for c in evaluated(rows)]
    print("\npaired on the same goals (after - before):")
    report = []
    for first, c1, second, c2 in pairs:
        before = scripted if first == SCRIPTED else evaluation(first, c1)
        after = evaluation(second, c2)
        if not before or not after:
            continue
        r = compare_paired(before, after)
        label = f"{first[0]} c{c1} -> {second[0]} c{c2}"
        print(
            f"  {label:<16} success {r.successes_before}->{r.successes_after} of {r.goals} "
            f"(lost {r.lost}, won {r.won}, McNemar p={r.mcnemar_p:.2f}); score "
            f"{r.score_difference:+.3f} +- {r.score_half_width:.3f}"
            f"{'  (score resolved)' if abs(r.score_difference) > r.score_half_width else ''}"
        )
        report.append({"before": [first, c1], "after": [second, c2], **asdict(r)})
    return report


def plot(results: dict[str, list[dict]], path: Path, args: argparse.Namespace) -> None:
    """Success (with its 95% Wilson interval) and mean score per cycle of each configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from trainers.common.episode_metrics import wilson_interval

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name, rows in results.items():
        rows = [row for row in rows if EVAL_SUCCESS_RATE in row]  # --eval-every skips
        cycles = [row["cycle"] for row in rows]
        success = [row[EVAL_SUCCESS_RATE] for row in rows]
        n = args.eval_goals
        bounds = [wilson_interval(round(s * n), n) for s in success]
        line = left.plot(cycles, success, "o-", label=name)[0]
        left.fill_between(
            cycles,
            [b[0] for b in bounds],
            [b[1] for b in bounds],
            alpha=0.12,
            color=line.get_color(),
        )
        right.plot(cycles, [row[EVAL_MEAN_SCORE] for row in rows], "s-", label=name)
    from matplotlib.ticker import MaxNLocator

    for axis, label in ((left, "success (95% interval)"), (right, "mean score")):
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_xlabel("cycle (0 = starting policy)")
        axis.set_ylabel(label)
        axis.set_ylim(0, 1)
        axis.grid(alpha=0.3)
    right.legend(fontsize=8)
    figure.suptitle(f"{args.eval_goals} test goals, greedy, max {args.max_turns} turns")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


if __name__ == "__main__":
    main()
