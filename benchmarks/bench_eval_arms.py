"""A model in several skills arms on the same test goals, as ``skillrl eval --skills`` plays them.

    python -m benchmarks eval_arms --env sokoban --goals 50 --max-turns 10 --arms on,off \
        --out docs/results/eval_arms_sokoban.json

The model (``--model``, default the environment's shipped adapter) plays under the settings it
records in its ``skillrl.json`` (environment options, prompt budget, decoding), greedy, in
float32, through the library call the command makes (``skillrl_cli.library.evaluate_model``),
with a fresh workspace bank seeded with the environment's starting bank. Each later arm is
compared with the first goal by goal (exact McNemar); each arm reports its seconds per turn
(model, environment, retrieval) beside the machine's matmul rate and load average.

``--baseline-model`` plays a second model first, with its retrieved entries, on the same goals
and bank, and every arm of ``--model`` is compared with it instead (a trained adapter against
the one it started from). ``--env-option KEY=VALUE`` overrides a recorded environment setting,
for both models (``test_rooms=100 eval_rooms=50``: Sokoban's test rooms 0-99).

    python -m benchmarks eval_arms --env sokoban --model <new adapter> \
        --baseline-model skillrl/adapters/sokoban --arms on --goals 100 \
        --env-option test_rooms=100 --env-option eval_rooms=50 --out sokoban_pair.json
"""

from __future__ import annotations

import argparse
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
    portable_command,
    provenance,
    run_text,
    write_result,
)

NAME = "eval_arms"
ARM_LABELS = {
    "on": "its retrieved entries",
    "placebo": "placebo entries",
    "off": "no entries",
    "baseline": "the baseline model, its retrieved entries",
}


def eval_settings(model: str, args: argparse.Namespace, arms: tuple[str, ...], workspace: Path):
    """What ``skillrl eval`` plays for ``model``: its recorded settings, --env-option over them."""
    from skillrl.policies import PolicyConfig
    from skillrl.policies.model_settings import ModelSettings
    from skillrl.prompts import PromptConfig
    from skillrl_cli.library import EvalSettings
    from skillrl_cli.options import parse_env_options
    from skillrl_core.goal_range import GoalRange
    from trainers.evaluate import EvalConfig

    recorded = ModelSettings.load(model)
    env_config = dict(recorded.env_options) if recorded else {}
    env_config.update(parse_env_options(tuple(args.env_option)))
    prompt = PromptConfig(max_prompt_tokens=recorded.max_prompt_tokens) if recorded else None
    return EvalSettings(
        policy=PolicyConfig(
            backend="transformers",
            model=model,
            dtype="float32",
            threads=args.threads,
            workspace=workspace,
        ),
        config=EvalConfig(goals=GoalRange(0, args.goals - 1)),
        env_id=args.env,
        env_config=env_config,
        arms=arms,
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        constrained=recorded.constrained if recorded and recorded.constrained is not None else True,
        prompt=prompt or PromptConfig(),
    )


def main() -> None:
    from dataclasses import asdict, replace

    from skillrl.policies.model_settings import shipped_adapter
    from skillrl_cli.library import evaluate_model
    from skillrl_core.errors import ConfigError
    from trainers.evaluate import compare_arms

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="sokoban", help="environment id")
    parser.add_argument("--model", default=None, help="default: the env's shipped adapter")
    parser.add_argument("--goals", type=int, default=50, help="test goals 0..N-1")
    parser.add_argument("--arms", default="on,off", help="skills arms, the first the baseline")
    parser.add_argument("--max-turns", type=int, default=10)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--baseline-model", default=None, help="a model every arm is paired with")
    parser.add_argument("--env-option", action="append", default=[], help="KEY=VALUE override")
    parser.add_argument("--out", required=True, help="results JSON")
    args = parser.parse_args()
    model = args.model or str(shipped_adapter(args.env))
    arms = tuple(a.strip() for a in args.arms.split(",") if a.strip())
    workspace = Path(tempfile.mkdtemp(prefix="eval-arms-"))
    settings = eval_settings(model, args, arms, workspace)
    results = {"provenance": provenance(NAME), "args": portable_arguments(vars(args))}
    results["model"] = portable_command(model)
    results["env_config"] = settings.env_config
    before = machine()
    baseline = None
    if args.baseline_model:
        against = eval_settings(args.baseline_model, args, ("on",), workspace)
        if against.env_config != settings.env_config:
            raise ConfigError(
                f"--baseline-model plays {against.env_config}, --model {settings.env_config}: "
                "pair them on the same environment settings (--env-option)"
            )
        baseline = replace(evaluate_model(against).arms[0], arm="baseline")
        results["baseline_model"] = portable_command(args.baseline_model)
    measured = evaluate_model(settings)
    results["machine_before_arms"] = before
    results.update(measured.to_dict())
    if baseline is not None:
        results["arms"].insert(0, baseline.to_dict())
        compared = compare_arms([baseline, *measured.arms])
        results["comparisons"] = [asdict(c) for c in compared] + results["comparisons"]
    write_result(Path(args.out), results, name=NAME)
    print(report(results))


def report(results: dict) -> str:
    """A results file as Markdown: each arm's figures, then each arm against the first."""
    args = results["args"]
    options = ", ".join(f"{k}={v}" for k, v in sorted(results["env_config"].items()))
    lines = [
        run_text(results),
        "",
        f"{args['env']} test goals 0-{args['goals'] - 1} ({options}), greedy, float32, at most "
        f"{args['max_turns']} turns, the model `{results['model']}` under its recorded settings"
        + (
            f" (the baseline model: `{results['baseline_model']}`, under its own)"
            if results.get("baseline_model")
            else ""
        )
        + f"; machine before the arms: {machine_text(results['machine_before_arms'])}.",
        "",
        "| arm | success | 95% interval | mean score | mean turns | s/turn (model / env / "
        "retrieval) | vs the last arm |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    per_turn = [sum(a["timings"]["per_turn"].values()) for a in results["arms"]]
    for arm, seconds in zip(results["arms"], per_turn, strict=True):
        greedy, timing = arm["greedy"], arm["timings"]["per_turn"]
        solved = round(greedy["success_rate"] * greedy["episodes"])
        low, high = greedy["success_interval"]
        lines.append(
            f"| {ARM_LABELS.get(arm['arm'], arm['arm'])} | {solved}/{greedy['episodes']} "
            f"| [{low:.2f}, {high:.2f}] | {greedy['mean_score']:.3f} | {greedy['mean_turns']:.1f} "
            f"| {timing['model']:.3f} / {timing['env']:.4f} / {timing['retrieval']:.3f} "
            f"| {seconds / per_turn[-1]:.2f}x |"
        )
    lines += [
        "",
        "| goal by goal | success | lost / won | McNemar p | |",
        "| --- | --- | ---: | ---: | --- |",
    ]
    for c in results["comparisons"]:
        resolved = "resolved" if c["p_value"] < 0.05 else "not resolved"
        lines.append(
            f"| {ARM_LABELS.get(c['baseline'], c['baseline'])} -> "
            f"{ARM_LABELS.get(c['other'], c['other'])} | {c['baseline_successes']} -> "
            f"{c['other_successes']} | {c['lost']} / {c['won']} | {c['p_value']:.3g} | {resolved} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
