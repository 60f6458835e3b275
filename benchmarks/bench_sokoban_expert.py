"""The scripted Sokoban expert per difficulty: success rate, moves vs optimum, return, time.

Run: python benchmarks/bench_sokoban_expert.py [--split test] [--max-turns 20] [--out F.json]

Baselines in the same run: a uniformly random mover, and a greedy one that pushes a box onto a
target when one move does it and otherwise moves at random without ever making a deadlock
push (it uses the environment's dead-square table). The gap to the expert is what planning is
worth. Also reports how long generating a room takes, per category.
"""

from __future__ import annotations

import argparse
import random
import statistics

from harness import Stopwatch, machine_text, portable_command, provenance, write_result

import envs
from envs.sokoban.config import DEFAULT_CATEGORIES
from envs.sokoban.expert import SokobanExpert
from envs.sokoban.levels import LevelSet
from envs.sokoban.room import DIRECTIONS, apply_move, parse_grid
from envs.sokoban.solver import dead_squares


class RandomMover:
    """Baseline: a uniformly random move each turn."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)

    def reset(self, info):
        pass

    def act(self, observation, info):
        return self.rng.choice(DIRECTIONS)


class GreedyMover(RandomMover):
    """Baseline: take a push onto a target when there is one, else a random safe move."""

    def act(self, observation, info):
        room, state = parse_grid(observation)
        dead = dead_squares(room)
        safe = []
        for direction in DIRECTIONS:
            move = apply_move(room, state, direction)
            if move.pushed and move.box_to in room.targets:
                return direction
            if move.moved and not (move.pushed and move.box_to in dead):
                safe.append(direction)
        return self.rng.choice(safe or list(DIRECTIONS))


def evaluate(env, policy, split):
    rows = {}
    for index in range(env.levels.split_size(split)):
        obs, info = env.reset(options={"split": split, "goal_index": index})
        optimum = info["goal"]["optimal_moves"]
        policy.reset(info)
        moves = 0
        while True:
            obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
            moves += 1
            if terminated or truncated:
                break
        row = rows.setdefault(
            info["category"], {"success": [], "excess": [], "return": [], "optimum": []}
        )
        row["optimum"].append(optimum)
        row["success"].append(info["success"])
        row["return"].append(info["episode_return"])
        if info["success"]:
            row["excess"].append(moves - optimum)
    return rows


def generation_times(categories, count=40):
    times = {}
    for name in categories:
        levels = LevelSet(envs.make("sokoban", categories=name).config)
        with Stopwatch() as clock:
            for number in range(count):
                levels.level("train", number)
        times[name] = clock.wall / count * 1000
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="test", choices=["test", "eval", "train"])
    parser.add_argument("--max-turns", type=int, default=20)
    parser.add_argument("--out", default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()
    run = provenance("sokoban_expert")
    print(f"machine at start: {machine_text(run['machine_at_start'])}")
    figures = {"provenance": run, "args": vars(args), "policies": {}}
    env = envs.make("sokoban", max_turns=args.max_turns)
    for name, policy in (
        ("expert", SokobanExpert(max_turns=args.max_turns)),
        ("random", RandomMover()),
        ("greedy (no planning)", GreedyMover()),
    ):
        with Stopwatch() as clock:
            rows = evaluate(env, policy, args.split)
        elapsed = clock.wall
        print(f"{name} on the {args.split} split, max_turns {args.max_turns} ({elapsed:.1f} s):")
        categories = {}
        for category, row in rows.items():
            success = statistics.mean(row["success"])
            excess = statistics.mean(row["excess"]) if row["excess"] else float("nan")
            print(
                f"  {category}: success {success:.3f} ({sum(row['success'])}/"
                f"{len(row['success'])}), moves over optimum when solved {excess:.2f}, "
                f"mean return {statistics.mean(row['return']):.2f} (optimum: mean "
                f"{statistics.mean(row['optimum']):.1f}, max {max(row['optimum'])} moves)"
            )
            categories[category] = {
                "success_rate": success,
                "successes": sum(row["success"]),
                "episodes": len(row["success"]),
                # None, not NaN, when nothing was solved: NaN is not JSON.
                "excess_moves_when_solved": excess if row["excess"] else None,
                "mean_return": statistics.mean(row["return"]),
                "mean_optimal_moves": statistics.mean(row["optimum"]),
                "max_optimal_moves": max(row["optimum"]),
            }
        figures["policies"][name] = {"seconds": elapsed, "categories": categories}
    figures["generation_ms_per_room"] = generation_times(DEFAULT_CATEGORIES)
    for category, ms in figures["generation_ms_per_room"].items():
        print(f"generation {category}: {ms:.1f} ms a room (mean of 40)")
    if args.out:
        write_result(args.out, figures, name="sokoban_expert")


if __name__ == "__main__":
    main()


def report(results: dict) -> str:
    """A results file as Markdown: successes per policy and room size, with the optimum."""
    policies = results["policies"]
    categories = list(next(iter(policies.values()))["categories"])
    lines = [
        f"`{portable_command(results['provenance']['command'])}` "
        f"(commit {results['provenance']['commit']}); "
        f"{results['args']['split']} split, {results['args']['max_turns']}-move cap",
        "",
        "| category | " + " | ".join(policies) + " | optimal moves (mean / max) |",
        "| --- |" + " ---: |" * len(policies) + " --- |",
    ]
    for category in categories:
        cells = []
        for row in policies.values():
            c = row["categories"][category]
            cells.append(f"{c['successes']}/{c['episodes']}")
        c = next(iter(policies.values()))["categories"][category]
        lines.append(
            f"| {category} | "
            + " | ".join(cells)
            + f" | {c['mean_optimal_moves']:.1f} / {c['max_optimal_moves']} |"
        )
    return "\n".join(lines)
