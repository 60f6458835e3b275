"""Cases within reach of the request: the goals whose served case the fit margin changes.

    python -m benchmarks case_fit --goals 300 \
        --reference docs/results/skill_value_rft.json:skills \
        --reference docs/results/case_offers.json:now --out F.json

One bank, seeded as a new workspace's (the shipped starting entries), asked two ways: ``nearest``
serves the case of the most similar request (``RetrievalConfig(case_fit_margin=0)``: only one
request's cases, tied in similarity, compete on the options their products come in), and
``fit`` serves, of the cases whose request is within ``case_fit_margin`` of the nearest, the
nearest one not known to lack an option value the task names (the shipped default). Only the
case line of a prompt can differ between the two, and a case is served by the instruction alone,
so an episode plays the same both ways unless its served case differs. The case each way serves
is looked up for test goals 0..N-1 first (no model); the policy then plays exactly the goals
where they differ, both ways, greedy, constrained, fp32, as ``skillrl eval`` plays, in one run,
and the two plays are compared goal by goal (exact McNemar).

``--reference FILE:ARM`` (repeatable; a later file's episodes replace an earlier one's, goal by
goal) names recorded plays of the ``nearest`` way over the same goals; with them the figure
over all N goals is reported (their outcomes where the served case is unchanged, this run's
``fit`` outcomes where it changed), and how many replayed ``nearest`` plays match them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_case_offers import (  # noqa: E402
    goal_queries,
    offers_wanted,
    open_bank,
    play_goals,
    served_cases,
)
from bench_prompt_budget import paired, paired_cells  # noqa: E402
from bench_skill_value import _compact, _record, arm_row  # noqa: E402
from harness import (  # noqa: E402
    machine,
    machine_text,
    portable_arguments,
    portable_command,
    provenance,
    run_text,
    write_result,
)

from memory import SkillBank  # noqa: E402
from memory.config import RetrievalConfig  # noqa: E402
from memory.types import RetrievalQuery, RetrievedSkills  # noqa: E402
from skillrl.policies import PolicyConfig, load_policy  # noqa: E402
from skillrl.policies.model_settings import shipped_adapter  # noqa: E402
from skillrl_core.records import EpisodeRecord  # noqa: E402

NAME = "case_fit"
ARMS: tuple[str, ...] = ("nearest", "fit")
LABELS = {
    "nearest": "the nearest request's case (fit margin 0)",
    "fit": f"the nearest fitting case within {RetrievalConfig().case_fit_margin} (shipped)",
}


class FixedRetrieval:
    """A bank whose every retrieval uses one ``RetrievalConfig``, whatever the caller asks."""

    def __init__(self, bank: SkillBank, config: RetrievalConfig) -> None:
        self.bank = bank
        self.config = config

    def retrieve(
        self,
        queries: list[RetrievalQuery],
        config: RetrievalConfig | None = None,
        *,
        record: bool = False,
    ) -> list[RetrievedSkills]:
        """The bank's retrieval with this object's config (``config`` is ignored)."""
        return self.bank.retrieve(queries, self.config, record=record)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.bank, name)


def arm_configs() -> dict[str, RetrievalConfig]:
    """The two ways of serving a case: the shipped retrieval, with and without its fit margin."""
    return {"nearest": RetrievalConfig(case_fit_margin=0.0), "fit": RetrievalConfig()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="default: the shipped WebShop adapter")
    parser.add_argument("--goals", type=int, default=300, help="test goals 0..N-1 looked up")
    parser.add_argument("--reference", action="append", default=[],
                        help="FILE:ARM: recorded nearest plays (repeatable)")  # fmt: skip
    parser.add_argument("--observation-mode", default="text_rich", help="WebShop page text")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--max-prompt-tokens", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", required=True, help="results JSON (written after each arm)")
    args = parser.parse_args()
    references = [reference_arg(text) for text in args.reference]
    model = args.model or str(shipped_adapter("webshop"))
    results: dict[str, Any] = {
        "provenance": provenance(NAME),
        "args": portable_arguments(vars(args)),
        "model": portable_command(model),
        "margin": RetrievalConfig().case_fit_margin,
        "rows": [],
        "episodes": {},
    }
    bank = open_bank("now", "")
    results["bank_entries"], results["bank_cases"] = bank.count(), bank.count(kind="case")
    queries = goal_queries(args)
    configs = arm_configs()
    served = {arm: served_cases(bank, queries, config) for arm, config in configs.items()}
    changed = [i for i in range(args.goals) if served["nearest"][i] != served["fit"][i]]
    results["served"] = served
    results["changed_goals"] = changed
    results["served_offers_wanted"] = offers_wanted(bank, served, queries, changed)
    print(f"the served case differs on {len(changed)} of {args.goals} goals", flush=True)
    policy = load_policy(
        PolicyConfig(backend="transformers", model=model, dtype="float32", threads=args.threads)
    )
    for arm in ARMS:
        before = machine()
        episodes, clock = play_goals(policy, FixedRetrieval(bank, configs[arm]), changed, args)
        r = arm_row(arm, episodes, clock, before)
        print(f"{arm}: {r['successes']}/{r['goals']} ({machine_text(before)} before)", flush=True)
        results["rows"].append(r)
        results["episodes"][arm] = [_compact(e) for e in episodes]
        write_result(Path(args.out), results, name=NAME)
    bank.close()
    played = {arm: [_record(e) for e in eps] for arm, eps in results["episodes"].items()}
    results["paired"] = paired(played["nearest"], played["fit"])
    if references:
        results["over_all_goals"] = over_all_goals(references, played, args.goals)
    write_result(Path(args.out), results, name=NAME)


def reference_arg(text: str) -> tuple[Path, str]:
    """``FILE:ARM`` -> (file, arm); the file must exist."""
    path, sep, arm = text.rpartition(":")
    if not sep or not path or not arm:
        raise SystemExit(f"--reference {text!r}: expected FILE:ARM")
    if not Path(path).is_file():
        raise SystemExit(f"--reference {text!r}: no file {path}")
    return Path(path), arm


def over_all_goals(
    references: list[tuple[Path, str]], played: dict[str, list[EpisodeRecord]], goals: int
) -> dict:
    """The ``fit`` way over all goals: the recorded outcomes where the served case is the same,
    this run's where it changed; and whether this run's ``nearest`` plays match the record."""
    by_goal: dict[str, bool] = {}
    for number, (path, arm) in enumerate(references):
        recorded = json.loads(path.read_text(encoding="utf-8"))["episodes"][arm]
        episodes = [_record(e) for e in recorded]
        by_goal.update(
            {e.goal_id: e.success for e in (episodes[:goals] if number == 0 else episodes)}
        )
    replayed = {e.goal_id: e.success for e in played["nearest"]}
    fit = {e.goal_id: e.success for e in played["fit"]}
    merged = {goal: fit.get(goal, success) for goal, success in by_goal.items()}
    return {
        "goals": len(by_goal),
        "reference_successes": sum(by_goal.values()),
        "successes": sum(merged.values()),
        "replayed_agree": sum(replayed[g] == by_goal.get(g) for g in replayed),
        "replayed": len(replayed),
        "references": [f"{path.as_posix()}:{arm}" for path, arm in references],
    }


def report(results: dict) -> str:
    """A results file as Markdown: which goals changed, both plays of them, the pairing."""
    args = results["args"]
    changed = results["changed_goals"]
    rows = {r["arm"]: r for r in results["rows"]}
    covers = results["served_offers_wanted"]
    lines = [
        run_text(results),
        "",
        f"Test goals 0-{args['goals'] - 1} looked up in one bank ({results['bank_entries']} "
        f"entries, {results['bank_cases']} cases): the served case differs on {len(changed)} of "
        f"them, played both ways (greedy, constrained, fp32, at most {args['max_turns']} turns, "
        f"`observation_mode={args['observation_mode']}`, {args['max_prompt_tokens']}-token "
        "prompts).",
        "",
        "The served case's product comes in every option the task names (by what its page "
        "listed) on "
        + ", ".join(f"{covers[arm]['changed']} ({arm})" for arm in ARMS)
        + " of those goals; of all "
        + f"{args['goals']}, on "
        + ", ".join(f"{covers[arm]['all']} ({arm})" for arm in ARMS)
        + ".",
        "",
        "| way | success on the changed goals | 95% interval | mean score | mean turns "
        "| s/turn (wall / CPU) | matmul GFLOP/s, load before |",
        "| --- | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for arm in ARMS:
        if arm not in rows:
            continue
        r = rows[arm]
        low, high = r["interval"]
        lines.append(
            f"| {LABELS[arm]} | {r['successes']}/{r['goals']} | [{low:.2f}, {high:.2f}] "
            f"| {r['mean_score']:.3f} | {r['mean_turns']:.1f} "
            f"| {r['seconds_per_turn']:.2f} / {r['cpu_seconds_per_turn']:.2f} "
            f"| {r['machine']['matmul_gflops']:.0f}, {r['machine']['load_average']:.2f} |"
        )
    p = results.get("paired")
    if p:
        resolved = "resolved" if p["mcnemar_p"] < 0.05 else "not resolved"
        lines += [
            "",
            "| goal by goal | success | lost / won | McNemar p | score difference (95%) | |",
            "| --- | --- | ---: | ---: | ---: | --- |",
            f"| nearest -> fit, the changed goals {paired_cells(p)} {resolved} |",
        ]
    whole = results.get("over_all_goals")
    if whole:
        lines += [
            "",
            f"Over all {whole['goals']} goals (the recorded outcomes, "
            + ", then ".join(f"`{r}`" for r in whole["references"])
            + f", where the served case is unchanged): {whole['reference_successes']} the "
            f"nearest way, {whole['successes']} the fit way; this run's nearest plays matched "
            f"the record on {whole['replayed_agree']} of the {whole['replayed']} goals it "
            "replayed.",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
