"""How much room a bank's evolution has on test goals: the most that new cases could change.

    python -m benchmarks evolution_room --goals 300 --validation-goals 1000 \
        --outcomes docs/results/skill_value_placebo.json:skills --out F.json

An improvement run can add to the starting bank only what its own episodes find: cases from
the training and validation goals it solves (``skillrl.distill.cases``), notes from its
failures. The starting bank already holds a case for every training request the scripted
expert solved, so what a run could still add is bounded by two oracles, each built here as the
library builds cases and added to a bank seeded as a new workspace's:

- **validation**: every one of eval-split goals 0..V-1 solved (the scripted expert plays them,
  and its episodes become cases as a run's validation episodes would);
- **alternatives**: for every training goal, a case for each other product on the expert's
  first results page that earns the full reward for that goal (a product a run's policy could
  have bought instead, and so a second case for the same request).

The **recipe** bank narrows both to what the recipe's own run plays: the training goals its
cycles draw (``--recipe-training-goals``, the first of its seeded training order: 6 cycles x 32
goals) and the eval-split goals it plays (``--recipe-validation-goals``: the 100 it chooses
checkpoints on, which never write to the bank, and the 4 validation goals after them), each
solved, and every other full-reward product found.

For each bank, each of test goals 0..N-1 is served the case a turn would be served (the
library's own retrieval with its shipped settings, no policy) and the product it names is
scored against the goal with the environment's reward, as ``case_reach`` scores it. Against the
starting bank: on how many goals the served case changes, and on how many it changes from a
product that cannot earn the full reward to one that can (a win if the policy follows its case)
or back (a loss). With ``--outcomes`` (a ``skill_value`` results file and arm), the policy's
recorded outcome per goal narrows the wins to goals it failed.

Evolution resolves a gain on these goals only if a policy that follows its case could: with
no losses, an exact McNemar test needs 6 wins for p < 0.05.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_case_fit import reference_arg  # noqa: E402
from bench_case_reach import case_row, goal_options, split_queries  # noqa: E402
from harness import Stopwatch, portable_arguments, provenance, run_text, write_result  # noqa: E402

import envs  # noqa: E402
from envs.webshop.config import WebShopConfig  # noqa: E402
from envs.webshop.expert import search_query  # noqa: E402
from envs.webshop.reward import get_reward  # noqa: E402
from envs.webshop.world import World, shared_world  # noqa: E402
from memory import BankConfig, SkillBank  # noqa: E402
from memory.config import RetrievalConfig  # noqa: E402
from memory.types import EntryDraft, offers_text  # noqa: E402
from skillrl.distill.cases import SOURCE, case_drafts  # noqa: E402
from skillrl.distill.seeding import seed_bank_if_empty  # noqa: E402
from skillrl_core.significance import mcnemar_exact  # noqa: E402
from trainers.cycle.config import CycleConfig  # noqa: E402
from trainers.cycle.cycle_rollout import training_goal_order  # noqa: E402

NAME = "evolution_room"
BANKS = ("starting", "validation", "alternatives", "both", "recipe")
AUTHOR = "benchmark:evolution_room"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=300, help="test goals 0..N-1 served")
    parser.add_argument(
        "--validation-goals", type=int, default=1000, help="eval-split goals 0..V-1 solved"
    )
    parser.add_argument(
        "--training-goals", type=int, default=None, help="training goals searched (default: all)"
    )
    parser.add_argument(
        "--recipe-training-goals",
        type=int,
        default=192,
        help="training goals the recipe's run draws (cycles x goals per cycle)",
    )
    parser.add_argument(
        "--recipe-validation-goals",
        type=int,
        default=104,
        help="eval-split goals 0..N-1 the recipe's run plays: the 100 it chooses checkpoints on "
        "and the 4 after them whose episodes evolve its bank (a superset: the first 100 never "
        "write to the bank)",
    )
    parser.add_argument(
        "--outcomes",
        default=None,
        help="FILE:ARM, a skill_value results file and arm: the policy's recorded outcomes",
    )
    parser.add_argument("--observation-mode", default="text_rich", help="WebShop page text")
    parser.add_argument("--out", required=True, help="results JSON")
    args = parser.parse_args()
    world = shared_world(WebShopConfig())
    queries, goals, goal_ids = split_queries("test", args.goals, args.observation_mode)
    train_count = len(world.split("train"))
    everything = range(train_count if args.training_goals is None else args.training_goals)
    drawn = training_goal_order(CycleConfig(), train_count)[: args.recipe_training_goals]
    with Stopwatch() as clock:  # each goal played once, whichever banks take its cases
        mode = args.observation_mode
        validation_goals = range(max(args.validation_goals, args.recipe_validation_goals))
        solved = validation_cases(validation_goals, mode)
        others = alternative_cases(world, sorted(set(everything) | set(drawn)), mode)
    validation = [d for i in range(args.validation_goals) for d in solved[i]]
    alternatives = [d for i in everything for d in others[i]]
    recipe = [d for i in range(args.recipe_validation_goals) for d in solved[i]]
    recipe += [d for i in drawn for d in others[i]]
    extra = {
        "starting": [],
        "validation": validation,
        "alternatives": alternatives,
        "both": validation + alternatives,
        "recipe": recipe,
    }
    served: dict[str, list[dict[str, Any]]] = {}
    cases: dict[str, int] = {}
    for name in BANKS:
        bank = seeded_bank(extra[name])
        cases[name] = bank.count(kind="case")
        found = bank.retrieve(queries, RetrievalConfig(), record=False)
        served[name] = [
            {"title": f.cases[0].entry.title, **case_row(f.cases[0], q, g, world)}
            if f.cases
            else {"title": "", "full": False}
            for f, q, g in zip(found, queries, goals, strict=True)
        ]
        bank.close()
    failed = policy_failures(args.outcomes, goal_ids) if args.outcomes else None
    results: dict[str, Any] = {
        "provenance": provenance(NAME),
        "args": portable_arguments(vars(args)),
        "drafts": {
            "validation": len(validation),
            "alternatives": len(alternatives),
            "recipe": len(recipe),
        },
        "build_seconds": round(clock.wall, 1),
        "bank_cases": cases,
        "rows": [changes(name, served, failed) for name in BANKS],
        "policy_failed": None if failed is None else sorted(failed),
        "served": served,
    }
    write_result(Path(args.out), results, name=NAME)


def seeded_bank(drafts: list[EntryDraft]) -> SkillBank:
    """A fresh bank seeded as a new workspace's, with ``drafts`` added."""
    bank = SkillBank.open(BankConfig(workspace=Path(tempfile.mkdtemp(prefix="evolution-room-"))))
    seed_bank_if_empty(bank, "webshop")
    if drafts:
        bank.add_many(drafts, author=AUTHOR)
    return bank


def validation_cases(indices: range, observation_mode: str) -> dict[int, list[EntryDraft]]:
    """Per eval-split goal of ``indices``, its case as the scripted expert solves it (none
    where the expert's episode makes no case)."""
    from skillrl.agents.expert import ExpertAgent
    from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine

    if not indices:
        return {}
    env_config = {"observation_mode": observation_mode}
    starts = [
        EpisodeStart("webshop", split="eval", goal_index=i, seed=i, env_config=env_config)
        for i in indices
    ]
    engine = RolloutEngine(ExpertAgent(max_turns=15), config=RolloutConfig(max_turns=15))
    episodes = engine.run(starts)  # in the order of ``starts``
    return {i: case_drafts([episode]) for i, episode in zip(indices, episodes, strict=True)}


def alternative_cases(
    world: World, indices: Sequence[int], observation_mode: str
) -> dict[int, list[EntryDraft]]:
    """Per training goal of ``indices``, a case for each product on its first results page (the
    expert's search) that earns the full reward for it, other than the goal's own product (its
    starting case)."""
    env = envs.make("webshop", observation_mode=observation_mode)
    by_goal: dict[int, list[EntryDraft]] = {}
    for i in indices:
        drafts = by_goal.setdefault(i, [])
        _, info = env.reset(options={"split": "train", "goal_index": i})
        goal = world.goals[int(info["goal_index"])]
        request = search_query(str(info["instruction"]))
        _, _, _, _, page = env.step(f"search[{request}]")
        for action in page["available_actions"]:
            asin = action[len("click[") : -1].upper()
            product = world.catalog.by_asin.get(asin)
            if product is None or asin == goal.asin:
                continue
            options = goal_options(product, goal)
            if get_reward(product, goal, world.catalog.prices[asin], options).reward < 1.0:
                continue
            drafts.append(
                EntryDraft(
                    kind="case",
                    title=f"A request like this was solved by click[{asin.lower()}]",
                    principle=f"Solved by: search[{request}], click[{asin.lower()}], "
                    + "".join(f"click[{v}], " for v in options.values())
                    + "click[buy now]",
                    when_to_apply=request,
                    offers=offers_text(
                        tuple(v for values in product.options.values() for v in values)
                    ),
                    env="webshop",
                    category=goal.category or None,
                    source=SOURCE,
                    reason="another product that earns the full reward for a training request",
                )
            )
    return by_goal


def policy_failures(spec: str, goal_ids: list[str]) -> set[int]:
    """Indices of the goals a ``skill_value`` arm's recorded episodes failed."""
    path, arm = reference_arg(spec)
    recorded = json.loads(path.read_text())["episodes"][arm]
    success = {e["goal_id"]: bool(e["success"]) for e in recorded}
    missing = [g for g in goal_ids if g not in success]
    if missing:
        raise SystemExit(f"--outcomes {spec}: no recorded episode for goal {missing[0]!r}")
    return {i for i, g in enumerate(goal_ids) if not success[g]}


def changes(
    name: str, served: dict[str, list[dict[str, Any]]], failed: set[int] | None
) -> dict[str, Any]:
    """One bank against the starting one: served-case changes, and which way each goes."""
    start, now = served["starting"], served[name]
    pairs = enumerate(zip(start, now, strict=True))
    changed = [i for i, (before, after) in pairs if before["title"] != after["title"]]
    wins = [i for i in changed if now[i]["full"] and not start[i]["full"]]
    losses = [i for i in changed if start[i]["full"] and not now[i]["full"]]
    row: dict[str, Any] = {
        "bank": name,
        "full": sum(r["full"] for r in now),
        "changed": len(changed),
        "wins": len(wins),
        "losses": len(losses),
        "p": mcnemar_exact(len(losses), len(wins)),
    }
    if failed is not None:
        row["wins_on_failed"] = sum(i in failed for i in wins)
        row["p_on_failed"] = mcnemar_exact(0, row["wins_on_failed"])
    return row


def report(results: dict) -> str:
    """A results file as Markdown: each bank's served products against the starting bank's."""
    args = results["args"]
    failed = results["policy_failed"]
    head = "| bank | cases | served product can earn the full reward | served case changes | " \
        "to a full-reward product / from one | exact McNemar p |"  # fmt: skip
    rule = "| --- | ---: | ---: | ---: | ---: | ---: |"
    if failed is not None:
        head += " of those, goals the policy failed | p, if it then solved each |"
        rule += " ---: | ---: |"
    lines = [
        run_text(results),
        "",
        f"Test goals 0-{args['goals'] - 1}, each served the case a turn would be served (shipped "
        f"retrieval settings, no policy). Added to a bank seeded as a new workspace's: "
        f"{results['drafts']['validation']} cases of eval-split goals "
        f"0-{args['validation_goals'] - 1} solved by the scripted expert (validation), and "
        f"{results['drafts']['alternatives']} cases of other products on a training goal's "
        f"first results page that earn its full reward (alternatives); the recipe bank holds "
        f"those of the {args['recipe_training_goals']} training goals the recipe's run draws "
        f"and of the eval-split goals 0-{args['recipe_validation_goals'] - 1} it plays "
        f"({results['drafts']['recipe']} drafts). Built in {results['build_seconds']:.0f} s.",
        "",
        head,
        rule,
    ]
    for row in results["rows"]:
        cells = [
            row["bank"],
            str(results["bank_cases"][row["bank"]]),
            f"{row['full']}/{args['goals']}",
            str(row["changed"]),
            f"{row['wins']} / {row['losses']}",
            f"{row['p']:.3g}" if row["changed"] else "-",
        ]
        if failed is not None:
            cells += [str(row["wins_on_failed"]), f"{row['p_on_failed']:.3g}"]
        lines.append("| " + " | ".join(cells) + " |")
    if failed is not None:
        lines += ["", f"The policy's recorded outcomes ({args['outcomes']}): it failed "
                  f"{len(failed)} of the {args['goals']} goals."]  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    main()
