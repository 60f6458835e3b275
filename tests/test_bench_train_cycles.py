"""The train_cycles benchmark's recipe arm and its scripted reference, without training."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from bench_train_cycles import SCRIPTED, first_result_with_options, report  # noqa: E402

from trainers.common.episode_metrics import compare_paired  # noqa: E402


def test_the_scripted_reference_plays_the_test_goals_as_pairable_episodes():
    args = argparse.Namespace(env_option=[], max_turns=8, eval_goals=3)
    episodes = first_result_with_options(args)
    assert [e.split for e in episodes] == ["test"] * 3
    assert len({e.goal_id for e in episodes}) == 3 and all(0 <= e.score <= 1 for e in episodes)
    same = compare_paired(episodes, episodes)
    assert (same.goals, same.lost, same.won) == (3, 0, 0)


def test_the_report_shows_the_recipe_arm_the_scripted_row_and_its_comparison():
    rows = [
        {"cycle": 0, "eval.success_rate": 0.5, "eval.mean_score": 0.8},
        {"cycle": 1, "train.success_rate": 0.4, "groups.kept": 4, "bench.wall_seconds": 600},
        {"cycle": 2, "eval.success_rate": 0.75, "eval.mean_score": 0.9, "bench.wall_seconds": 900},
    ]
    paired = {"successes_before": 3, "successes_after": 3, "lost": 1, "won": 1,
              "mcnemar_p": 1.0, "score_difference": 0.0, "score_half_width": 0.1}  # fmt: skip
    summary = {
        "command": "python benchmarks/bench_train_cycles.py --config configs/webshop-rft.yaml",
        "args": {
            "eval_goals": 4,
            "max_turns": 8,
            "goals": 2,
            "group_size": 4,
            "lr": 2e-4,
            "lora": True,
            "threads": 2,
            "estimator": "rft",
        },  # fmt: skip
        "results": {"r: recipe": rows},
        "expert": {"success_rate": 1.0, "mean_score": 1.0},
        "scripted": {"successes": 3, "mean_score": 0.85},
        "paired": [{"before": [SCRIPTED, 0], "after": ["r: recipe", 2], **paired}],
    }
    text = report(summary)
    assert "RFT update" in text
    assert "| r: recipe | 2 | 3/4 |" in text and "| r: recipe | 1 | not evaluated |" in text
    assert "| first result + goal options (scripted) | | 3/4 | [0.30, 0.95] | 0.850 |" in text
    assert "| scripted -> r c2 | 3 -> 3 | 1 / 1 |" in text


def test_every_evaluated_cycle_is_paired_with_cycle_0_the_one_before_and_the_scripted(tmp_path):
    from bench_train_cycles import paired_report

    from skillrl_core.records import EpisodeRecord
    from trainers.cycle.run_files import RunFiles

    def episodes(wins: list[bool]) -> list[dict]:
        out = []
        for goal, won in enumerate(wins):
            record = EpisodeRecord("webshop", str(goal), "buy", "", split="test")
            record.success, record.score = won, float(won)
            out.append(record.to_dict())
        return out

    files = RunFiles(tmp_path / "r" / "runs" / "bench")
    outcomes = {0: [0, 0, 0, 1], 3: [1, 0, 0, 1], 6: [1, 1, 1, 1]}
    for cycle, wins in outcomes.items():
        files.save_episodes(cycle, "eval", {"episodes": episodes([bool(w) for w in wins])})
    rows = [{"cycle": c, **({"eval.success_rate": 0.5} if c in outcomes else {})} for c in range(7)]
    scripted = [EpisodeRecord.from_dict(e) for e in episodes([True, True, False, False])]
    pairs = paired_report(tmp_path, {"r: recipe": rows}, scripted)
    sides = [(p["before"][1], p["after"][1], p["before"][0][0]) for p in pairs]
    assert sides == [(0, 3, "r"), (0, 6, "r"), (3, 6, "r"), (0, 3, "s"), (0, 6, "s")]
    three_to_six = pairs[2]
    assert (three_to_six["successes_before"], three_to_six["successes_after"]) == (2, 4)
    assert (three_to_six["lost"], three_to_six["won"]) == (0, 2)


def test_a_recipe_arm_is_a_letter_a_name_and_flags_and_pairs_with_the_recipe(tmp_path):
    import pytest
    from bench_train_cycles import paired_report, recipe_arm

    from skillrl_core.records import EpisodeRecord
    from trainers.cycle.run_files import RunFiles

    assert recipe_arm("b: bf16 rollouts=--rollout-dtype bfloat16") == (
        "b: bf16 rollouts",
        ["--rollout-dtype", "bfloat16"],
    )
    for bad in ("bf16 rollouts=--bf16", "b: no flags", "r: the recipe's own=--bf16", "bb: x=--y"):
        with pytest.raises(argparse.ArgumentTypeError, match="LETTER: NAME=FLAGS"):
            recipe_arm(bad)

    def save(letter: str, cycle: int, wins: list[int]) -> None:
        files = RunFiles(tmp_path / letter / "runs" / "bench")
        records = []
        for goal, won in enumerate(wins):
            record = EpisodeRecord("webshop", str(goal), "buy", "", split="test")
            record.success, record.score = bool(won), float(won)
            records.append(record.to_dict())
        files.save_episodes(cycle, "eval", {"episodes": records})

    for letter, cycle, wins in [("r", 0, [0, 0, 1]), ("r", 2, [1, 0, 1]), ("b", 0, [0, 0, 1])]:
        save(letter, cycle, wins)
    save("b", 2, [1, 1, 1])
    rows = [{"cycle": c, **({"eval.success_rate": 0.5} if c != 1 else {})} for c in range(3)]
    pairs = paired_report(tmp_path, {"r: recipe": rows, "b: bf16 rollouts": rows})
    sides = [(p["before"][0][0], p["before"][1], p["after"][0][0], p["after"][1]) for p in pairs]
    assert ("r", 2, "b", 2) in sides and ("b", 0, "b", 2) in sides
    across = pairs[sides.index(("r", 2, "b", 2))]
    assert (across["successes_before"], across["successes_after"], across["won"]) == (2, 3, 1)
