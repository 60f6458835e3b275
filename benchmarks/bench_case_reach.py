"""Which fit margin to serve cases with: each margin's served product, scored without a policy.

    python -m benchmarks case_reach --split eval --goals 400 --out F.json

For each of goals 0..N-1 of a split, one bank seeded as a new workspace's is asked for its
nearest cases (``--fetch`` of them, by the request alone, with the instruction's wanted option
values), and the product each case names is scored against the goal with the environment's own
reward: bought with the goal's options where the product comes in them, at the price it sells
at. For each margin, the case served is the nearest one within the margin that is not known to
lack a wanted option (what ``RetrievalConfig.case_fit_margin`` does), and the figure is on how
many goals that product can earn the full reward. Choose the margin on ``eval``; ``test`` is
read only to report what the choice does there.

The reasons the nearest case's product falls short (an option it does not come in, a price
over the limit, an attribute it lacks) are counted too, and how many goals one of the fetched
cases' products could solve.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_case_offers import open_bank  # noqa: E402
from harness import portable_arguments, provenance, run_text, write_result  # noqa: E402

import envs  # noqa: E402
from envs.webshop.config import WebShopConfig  # noqa: E402
from envs.webshop.data import Product  # noqa: E402
from envs.webshop.goals import Goal  # noqa: E402
from envs.webshop.reward import get_reward  # noqa: E402
from envs.webshop.world import World, shared_world  # noqa: E402
from memory.config import RetrievalConfig  # noqa: E402
from memory.retrieval import TIE  # noqa: E402
from memory.types import RetrievalQuery, offer_values  # noqa: E402

NAME = "case_reach"
MARGINS = (0.0, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.2, 1.0)
_PRODUCT = re.compile(r"click\[(\w+)\]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("eval", "test"), default="eval")
    parser.add_argument("--goals", type=int, default=400, help="goals 0..N-1 of the split")
    parser.add_argument("--fetch", type=int, default=16, help="nearest cases scored per goal")
    parser.add_argument("--observation-mode", default="text_rich", help="WebShop page text")
    parser.add_argument("--out", required=True, help="results JSON")
    args = parser.parse_args()
    world = shared_world(WebShopConfig())
    queries, goals, _ = split_queries(args.split, args.goals, args.observation_mode)
    bank = open_bank("now", "")
    nearest_first = RetrievalConfig(k_cases=args.fetch, case_fit_margin=0.0)
    found = bank.retrieve(queries, nearest_first, record=False)
    scored = [
        [case_row(hit, query, goal, world) for hit in f.cases]
        for f, query, goal in zip(found, queries, goals, strict=True)
    ]
    results: dict[str, Any] = {
        "provenance": provenance(NAME),
        "args": portable_arguments(vars(args)),
        "bank_cases": bank.count(kind="case"),
        "by_margin": {str(m): sum(served(rows, m)["full"] for rows in scored) for m in MARGINS},
        "nearest_short": shortfalls([rows[0] for rows in scored if rows]),
        "any_fetched_full": sum(any(r["full"] for r in rows) for rows in scored),
        "cases": scored,
    }
    bank.close()
    write_result(Path(args.out), results, name=NAME)


def split_queries(
    split: str, count: int, observation_mode: str
) -> tuple[list[RetrievalQuery], list[Goal], list[str]]:
    """Retrieval's first-turn query, the goal and its id for goals 0..count-1 of ``split``."""
    env = envs.make("webshop", observation_mode=observation_mode)
    adapter = envs.adapter_for("webshop")
    world = shared_world(WebShopConfig())
    queries, goals, goal_ids = [], [], []
    for i in range(count):
        observation, info = env.reset(options={"split": split, "goal_index": i})
        instruction = str(info["instruction"])
        category = str(info.get("category") or "") or None
        wants = adapter.wanted_values(instruction)
        queries.append(RetrievalQuery(instruction, observation, "webshop", category, wants=wants))
        goals.append(world.goals[int(info["goal_index"])])
        goal_ids.append(str(info["goal_id"]))
    return queries, goals, goal_ids


def case_row(hit: Any, query: RetrievalQuery, goal: Goal, world: World) -> dict[str, Any]:
    """One fetched case: its similarity, whether it is known to lack a wanted value, and what
    its product earns bought with the goal's options where it comes in them."""
    entry = hit.entry
    match = _PRODUCT.search(entry.title)
    product = world.catalog.by_asin[match.group(1).upper()] if match else None
    lacks = (
        bool(query.wants) and bool(entry.offers) and not offer_values(query.wants) <= entry.offered
    )
    row: dict[str, Any] = {"similarity": hit.similarity, "lacks": lacks, "full": False}
    if product is None:
        return row
    result = get_reward(
        product, goal, world.catalog.prices[product.asin], goal_options(product, goal)
    )
    breakdown = result.breakdown
    row.update(
        full=result.reward >= 1.0,
        options_missed=len(breakdown["options"]["missed"]),
        over_price=not breakdown["price"]["ok"],
        attributes_missed=len(breakdown["attributes"]["missed"]),
    )
    return row


def goal_options(product: Product, goal: Goal) -> dict[str, str]:
    """The options ``product`` comes in that ``goal`` names, as a buyer would choose them."""
    wanted = {v.lower() for v in goal.wanted_options}
    return {
        name: v for name, values in product.options.items() for v in values if v.lower() in wanted
    }


def served(rows: list[dict[str, Any]], margin: float) -> dict[str, Any]:
    """The case served with ``margin`` (rows nearest first): within reach, not known to lack."""
    if not rows:
        return {"full": False}
    reach = [r for r in rows if r["similarity"] >= rows[0]["similarity"] - margin - TIE]
    return min(reach, key=lambda r: (r["lacks"], -r["similarity"]))


def shortfalls(nearest: list[dict[str, Any]]) -> dict[str, int]:
    """Why the nearest case's product falls short, over the goals where it does."""
    short = [r for r in nearest if not r["full"] and "options_missed" in r]
    return {
        "goals": len(short),
        "an option": sum(r["options_missed"] > 0 for r in short),
        "the price": sum(r["over_price"] for r in short),
        "an attribute": sum(r["attributes_missed"] > 0 for r in short),
    }


def report(results: dict) -> str:
    """A results file as Markdown: full-reward products by margin, and the nearest's shortfalls."""
    args = results["args"]
    margins = list(results["by_margin"])
    short = results["nearest_short"]
    return "\n".join(
        [
            run_text(results),
            "",
            f"{args['split'].capitalize()}-split goals 0-{args['goals'] - 1}, a bank of "
            f"{results['bank_cases']} cases, the {args['fetch']} nearest scored per goal.",
            "",
            "| margin | " + " | ".join(margins) + " |",
            "| --- | " + " | ".join("---:" for _ in margins) + " |",
            f"| served product can earn the full reward, of {args['goals']} goals | "
            + " | ".join(str(results["by_margin"][m]) for m in margins)
            + " |",
            "",
            f"One of the {args['fetch']} nearest cases' products can on "
            f"{results['any_fetched_full']}. The nearest case's product falls short on "
            f"{short['goals']} goals: an option it "
            f"does not come in on {short['an option']}, a price over the limit on "
            f"{short['the price']}, an attribute it lacks on {short['an attribute']}.",
        ]
    )


if __name__ == "__main__":
    main()
