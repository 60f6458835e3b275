"""Cases that know what their product comes in: the goals whose case changes, played both ways.

    python -m benchmarks case_offers --before-cases CASES.json --goals 300 --out F.json

Two banks, seeded alike (the starting skills, then cases): ``now``, the shipped cases (one per
request and product, each with the options its product's page listed, ``offers``), and
``before``, the cases of ``--before-cases`` (an earlier cases file: one case per request, no
offers). Retrieval serves a case by the request alone, so an episode's prompts differ between
the two banks only where the case served for its instruction differs (the other entries are
the same starting skills, retrieved the same way). For each of test goals 0..N-1 the case each
bank serves is looked up first (no model); the policy then plays exactly the goals where they
differ, with each bank, greedy, constrained, fp32, as ``skillrl eval`` plays, in one run, and
the two plays are compared goal by goal (exact McNemar). On every other goal both banks serve
the same prompts, and greedy fp32 play does not depend on the batch, so the two arms cannot
differ there.

``--reference-run`` (a ``skill_value`` result whose arm ``skills`` played the same goals with
the ``before`` cases) adds the figure over all N goals: its outcomes on the goals whose case is
unchanged, with this run's ``now`` outcomes on the rest; and how many of the replayed goals'
``before`` outcomes match it (they should all: greedy play is deterministic across machines).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_prompt_budget import paired, paired_cells  # noqa: E402
from bench_skill_value import _compact, _record, arm_row, eval_runner  # noqa: E402
from harness import (  # noqa: E402
    Stopwatch,
    machine,
    machine_text,
    portable_arguments,
    portable_command,
    provenance,
    run_text,
    write_result,
)

import envs  # noqa: E402
from memory import BankConfig, SkillBank  # noqa: E402
from memory.config import RetrievalConfig  # noqa: E402
from memory.types import RetrievalQuery, offer_values  # noqa: E402
from skillrl.distill.seeding import seed_bank, seed_bank_if_empty, starting_bank_path  # noqa: E402
from skillrl.policies import PolicyConfig, load_policy  # noqa: E402
from skillrl.policies.model_settings import shipped_adapter  # noqa: E402
from skillrl_core.records import EpisodeRecord  # noqa: E402

NAME = "case_offers"
ARMS: tuple[str, ...] = ("before", "now")
LABELS = {
    "before": "the cases shipped before (one per request, offers not known)",
    "now": "the shipped cases (one per request and product, with offers)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="default: the shipped WebShop adapter")
    parser.add_argument("--before-cases", required=True,
                        help="the earlier cases file (skillrl-starting-bank format)")  # fmt: skip
    parser.add_argument("--goals", type=int, default=300, help="test goals 0..N-1 looked up")
    parser.add_argument("--reference-run", default=None,
                        help="a skill_value result (arm skills: the before cases)")  # fmt: skip
    parser.add_argument("--observation-mode", default="text_rich", help="WebShop page text")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--max-prompt-tokens", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", required=True, help="results JSON (written after each arm)")
    args = parser.parse_args()
    model = args.model or str(shipped_adapter("webshop"))
    results: dict[str, Any] = {
        "provenance": provenance(NAME),
        "args": portable_arguments(vars(args)),
        "model": portable_command(model),
        "rows": [],
        "episodes": {},
    }
    banks = {arm: open_bank(arm, args.before_cases) for arm in ARMS}
    results["bank_entries"] = {arm: bank.count() for arm, bank in banks.items()}
    results["bank_cases"] = {arm: bank.count(kind="case") for arm, bank in banks.items()}
    queries = goal_queries(args)
    served = {arm: served_cases(bank, queries) for arm, bank in banks.items()}
    changed = [i for i in range(args.goals) if served["before"][i] != served["now"][i]]
    results["served"] = served
    results["changed_goals"] = changed
    results["served_offers_wanted"] = offers_wanted(banks["now"], served, queries, changed)
    print(f"the served case differs on {len(changed)} of {args.goals} goals", flush=True)
    policy = load_policy(
        PolicyConfig(backend="transformers", model=model, dtype="float32", threads=args.threads)
    )
    for arm in ARMS:
        before = machine()
        episodes, clock = play_goals(policy, banks[arm], changed, args)
        r = arm_row(arm, episodes, clock, before)
        print(f"{arm}: {r['successes']}/{r['goals']} ({machine_text(before)} before)", flush=True)
        results["rows"].append(r)
        results["episodes"][arm] = [_compact(e) for e in episodes]
        write_result(Path(args.out), results, name=NAME)
    for bank in banks.values():
        bank.close()
    played = {arm: [_record(e) for e in eps] for arm, eps in results["episodes"].items()}
    results["paired"] = paired(played["before"], played["now"])
    if args.reference_run:
        results["over_all_goals"] = over_all_goals(
            json.loads(Path(args.reference_run).read_text(encoding="utf-8")),
            played,
            args.goals,
        )
    write_result(Path(args.out), results, name=NAME)


def open_bank(arm: str, before_cases: str) -> SkillBank:
    """A fresh bank seeded as a new workspace's (``now``) or with the earlier cases."""
    bank = SkillBank.open(BankConfig(workspace=Path(tempfile.mkdtemp(prefix=f"cases-{arm}-"))))
    if arm == "now":
        seed_bank_if_empty(bank, "webshop")
    else:
        seed_bank(bank, starting_bank_path("webshop"), "webshop", cases=before_cases)
    return bank


def goal_queries(args: argparse.Namespace) -> list[RetrievalQuery]:
    """Retrieval's own query for the first turn of each of test goals 0..N-1 (read once)."""
    env = envs.make("webshop", observation_mode=args.observation_mode)
    adapter = envs.adapter_for("webshop")
    queries = []
    for i in range(args.goals):
        observation, info = env.reset(options={"split": "test", "goal_index": i})
        instruction = str(info["instruction"])
        queries.append(
            RetrievalQuery(
                instruction,
                observation,
                "webshop",
                str(info.get("category") or "") or None,
                wants=adapter.wanted_values(instruction),
            )
        )
    return queries


def served_cases(
    bank: SkillBank, queries: list[RetrievalQuery], config: RetrievalConfig | None = None
) -> list[str]:
    """The title of the case each query is served (cases go by the request alone)."""
    found = bank.retrieve(queries, config or RetrievalConfig(), record=False)
    return [f.cases[0].entry.title if f.cases else "" for f in found]


def offers_wanted(
    bank: SkillBank, served: dict[str, list[str]], queries: list[RetrievalQuery], changed: list
) -> dict:
    """Per arm, on how many goals (all looked up, and the ``changed`` ones) the served case's
    product comes in every option value the instruction names: by what the product's page
    listed, as ``bank``'s cases record it (the earlier cases did not keep it)."""
    offered = {entry.title: entry.offered for entry in bank.list(kind="case")}
    wanted = [offer_values(q.wants) for q in queries]
    out = {}
    for arm, titles in served.items():
        covers = [
            bool(t) and wanted[i] <= offered.get(t, frozenset()) for i, t in enumerate(titles)
        ]
        out[arm] = {"all": sum(covers), "changed": sum(covers[i] for i in changed)}
    return out


def play_goals(
    policy: Any, bank: SkillBank, goals: list[int], args: argparse.Namespace
) -> tuple[list[EpisodeRecord], Stopwatch]:
    """Test goals ``goals``, greedy and constrained, each seeded as ``skill_value`` seeds it."""
    runner = eval_runner(policy, bank, args)
    starts = [runner.start("test", i, seed=args.seed + i) for i in goals]
    if policy.prefix_cache is not None:
        policy.prefix_cache.clear()
    with Stopwatch() as clock:
        episodes = runner.run(starts, temperature=0.0, sampling_seed=args.seed)
    return episodes, clock


def over_all_goals(reference: dict, played: dict[str, list[EpisodeRecord]], goals: int) -> dict:
    """The ``now`` cases over all goals: the reference run's outcomes where the served case is
    the same, this run's where it changed; and whether this run's ``before`` play reproduced
    the reference on the goals it replayed."""
    recorded = [_record(e) for e in reference["episodes"]["skills"]][:goals]
    by_goal = {e.goal_id: e.success for e in recorded}
    replayed = {e.goal_id: e.success for e in played["before"]}
    now = {e.goal_id: e.success for e in played["now"]}
    merged = {goal: now.get(goal, success) for goal, success in by_goal.items()}
    return {
        "goals": len(by_goal),
        "reference_successes": sum(by_goal.values()),
        "successes": sum(merged.values()),
        "replayed_agree": sum(replayed[g] == by_goal.get(g) for g in replayed),
        "replayed": len(replayed),
        "reference_command": reference["provenance"]["command"],
    }


def report(results: dict) -> str:
    """A results file as Markdown: which goals changed, both plays of them, the pairing."""
    args = results["args"]
    changed = results["changed_goals"]
    rows = {r["arm"]: r for r in results["rows"]}
    lines = [
        run_text(results),
        "",
        f"Test goals 0-{args['goals'] - 1} looked up: the served case differs on {len(changed)} "
        f"of them, played with each bank (greedy, constrained, fp32, at most "
        f"{args['max_turns']} turns, `observation_mode={args['observation_mode']}`, "
        f"{args['max_prompt_tokens']}-token prompts). Banks: before "
        f"{results['bank_entries']['before']} entries ({results['bank_cases']['before']} cases), "
        f"now {results['bank_entries']['now']} ({results['bank_cases']['now']} cases).",
        "",
        "Of those goals, the served case's product comes in every option the task names (by "
        "what its page listed) on "
        + ", ".join(f"{results['served_offers_wanted'][arm]['changed']} ({arm})" for arm in ARMS)
        + f"; of all {args['goals']} goals, on "
        + ", ".join(f"{results['served_offers_wanted'][arm]['all']} ({arm})" for arm in ARMS)
        + ".",
        "",
        "| arm | success on the changed goals | 95% interval | mean score | mean turns "
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
            f"| before -> now, the changed goals {paired_cells(p)} {resolved} |",
        ]
    whole = results.get("over_all_goals")
    if whole:
        lines += [
            "",
            f"Over all {whole['goals']} goals (the reference run's outcomes where the served case "
            f"is unchanged): {whole['reference_successes']} with the cases before, "
            f"{whole['successes']} with the shipped cases; this run's play with the cases before "
            f"matched the reference on {whole['replayed_agree']} of the {whole['replayed']} "
            "goals it replayed.",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
