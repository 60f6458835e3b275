"""The scripted expert on WebShop's test split (goals 0-499): success rate, mean score, turns.

Run: python benchmarks/bench_expert.py [--split test] [--mode text] [--out F.json]

Baselines in the same run: "first result" (search the instruction, open the top result, buy it)
with and without clicking the goal's options; the gap to the expert is what reading titles,
options and prices (the near-duplicates) is worth.
"""

from __future__ import annotations

import argparse
import statistics

from harness import Stopwatch, machine_text, portable_command, provenance, write_result

import envs
from envs.webshop.expert import WebShopExpert, search_query


class FirstResult:
    """Baseline: search, open the first result, buy."""

    def reset(self, info):
        self.instruction = info["instruction"]

    def act(self, observation, info):
        actions = info["available_actions"]
        if actions == ["search[<query>]"]:
            return f"search[{search_query(self.instruction)}]"
        if "click[buy now]" in actions:
            return "click[buy now]"
        products = [
            a
            for a in actions
            if a not in ("click[back to search]", "click[next >]", "click[< prev]")
        ]
        return products[0] if products else "click[back to search]"


class FirstResultWithOptions(FirstResult):
    """Baseline: like FirstResult, but clicks the goal's option values that the item offers."""

    def reset(self, info):
        super().reset(info)
        self.pending = list(info["goal"]["options"])

    def act(self, observation, info):
        actions = info["available_actions"]
        while "click[buy now]" in actions and self.pending:
            action = f"click[{self.pending.pop(0)}]"
            if action in actions:
                return action
        return super().act(observation, info)


def evaluate(env, make_policy, split, count):
    scores, successes, turns = [], 0, []
    for index in range(count):
        obs, info = env.reset(options={"split": split, "goal_index": index})
        policy = make_policy()
        policy.reset(info)
        reward, steps = 0.0, 0
        while True:
            obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
            steps += 1
            if terminated or truncated:
                break
        scores.append(reward)
        successes += info["success"]
        turns.append(steps)
    return successes / count, statistics.mean(scores), statistics.mean(turns)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="test", choices=["test", "eval", "train"])
    parser.add_argument("--mode", default="text", choices=["text", "text_rich"])
    parser.add_argument("--goals", type=int, default=500, help="goals from the split's start")
    parser.add_argument("--out", default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()
    run = provenance("expert")
    print(f"machine at start: {machine_text(run['machine_at_start'])}")
    env = envs.make("webshop", observation_mode=args.mode)
    count = min(args.goals, len(env.world.split(args.split)))
    policies = (
        ("expert", WebShopExpert),
        ("first result, no options", FirstResult),
        ("first result + goal options", FirstResultWithOptions),
    )
    figures = {"provenance": run, "args": vars(args), "goals": count, "policies": {}}
    for name, factory in policies:
        with Stopwatch() as clock:
            success, score, turns = evaluate(env, factory, args.split, count)
        print(
            f"{name}: {count} {args.split} goals, success {success:.3f}, mean score "
            f"{score:.3f}, mean turns {turns:.2f} ({clock.wall:.1f} s)"
        )
        figures["policies"][name] = {
            "success_rate": success,
            "mean_score": score,
            "mean_turns": turns,
            "seconds": clock.wall,
        }
    if args.out:
        write_result(args.out, figures, name="expert")


if __name__ == "__main__":
    main()


def report(results: dict) -> str:
    """A results file as Markdown: each policy's success, score and turns on the same goals."""
    lines = [
        f"`{portable_command(results['provenance']['command'])}` "
        f"(commit {results['provenance']['commit']}); "
        f"{results['goals']} {results['args']['split']} goals, {results['args']['mode']} pages",
        "",
        "| policy | success | mean score | mean turns |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, row in results["policies"].items():
        lines.append(
            f"| {name} | {row['success_rate']:.3f} | {row['mean_score']:.3f} "
            f"| {row['mean_turns']:.2f} |"
        )
    return "\n".join(lines)
