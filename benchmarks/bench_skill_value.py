"""What retrieved skills carry: a skill-augmented policy with its entries, placebo entries, none.

    python -m benchmarks skill_value --model SKILL_ADAPTER --baseline-model NO_SKILL_ADAPTER \
        --eval-goals 300 --out F.json

Four arms on the same test goals (0..N-1), greedy, constrained, the same turn cap, page mode and
prompt budget, each played exactly as ``skillrl eval`` plays (``PolicyRollouts``, fp32):

- ``skills``: the skill-augmented policy (``--model``, default the shipped adapter) with the
  entries retrieved from the seeded starting bank at every turn;
- ``placebo``: the same policy with placebo entries (``memory.placebo``): the same count per
  turn, retrieved for a training goal of another category, never one retrieved for the
  episode's own goal;
- ``none``: the same policy with no entries;
- ``baseline``: ``--baseline-model`` (the no-skill adapter that shipped before) with none;
- ``repeats``: as ``skills``, but decoding may repeat an action that left the page unchanged
  (``LLMAgentConfig.skip_no_op_repeats`` off, as decoding was before it): what that rule is
  worth. Every other arm decodes with the rule on, as ``skillrl eval`` does;
- ``previous``: ``--baseline-model`` with the entries retrieved from the same bank (the policy
  the package shipped before, played as ``skillrl run`` would play it today);
- ``script``: the scripted "first result + goal options" policy (no model), the bar a learned
  agent has to clear;
- ``evolved``: as ``skills``, with the bank of ``--evolved-workspace`` (a training run's
  workspace, whose bank its cycles distilled into and kept up) in place of the starting bank:
  whether evolution made the bank more useful to the policy. The bank is copied to a temporary
  folder first, so playing it leaves the run's workspace as it was.
- ``bank``: as ``skills``, with the bank of ``--bank-workspace`` (any workspace: e.g. one seeded
  from the cases an earlier version shipped), copied first as for ``evolved``; ``--bank-label``
  says in the report what it holds. Paired against ``skills``: what the starting bank gains
  over it.

The bank is the seeded starting bank: the starting skills and the shipped cases (what solved
each training request, ``skillrl.distill.cases``). The placebo verdict is also reported on the
test goals whose product no training goal asks for (``novel``): there a case can only be another
product's, own or placebo.

Skills carry information only if ``skills`` beats ``placebo``; ``none`` says what the entries'
presence is worth and ``baseline`` what the skill-augmented cold start is worth against the one
it replaces. Every pair is compared goal by goal (exact McNemar); each arm reports wall and
process-CPU seconds per turn and prompt tokens per turn, beside the machine's matmul rate and
load average. The file is written after every arm; ``--resume`` skips the arms it holds (their
episodes are kept in it).
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

from bench_prompt_budget import paired, paired_cells, row  # noqa: E402
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

from memory import BankConfig, SkillBank  # noqa: E402
from memory.placebo import PlaceboRetrieval  # noqa: E402
from skillrl.distill.seeding import seed_bank_if_empty  # noqa: E402
from skillrl.policies import PolicyConfig, load_policy  # noqa: E402
from skillrl.policies.model_settings import shipped_adapter  # noqa: E402
from skillrl.prompts import PromptConfig  # noqa: E402
from skillrl.skill_arms import donor_tasks  # noqa: E402
from skillrl_core.records import EpisodeRecord  # noqa: E402
from trainers.common.policy_rollouts import PolicyRollouts  # noqa: E402

NAME = "skill_value"
ARMS: tuple[str, ...] = (
    "skills", "placebo", "none", "baseline", "repeats", "previous", "script", "evolved", "bank"
)  # fmt: skip
LABELS = {
    "skills": "(a) skill-augmented policy, its retrieved entries",
    "placebo": "(b) same policy, placebo entries (another goal's)",
    "none": "(c) same policy, no entries",
    "baseline": "(d) no-skill adapter, no entries",
    "repeats": "(e) as (a), no-op repeats allowed",
    "previous": "(f) the adapter shipped before, its retrieved entries",
    "script": "(g) scripted first result + goal options",
    "evolved": "(h) as (a), the bank a training run evolved",
    "bank": "(i) as (a), the bank of another workspace",
}
PAIRS: tuple[tuple[str, str], ...] = (
    ("placebo", "skills"),
    ("none", "skills"),
    ("baseline", "skills"),
    ("baseline", "none"),
    ("none", "placebo"),
    ("repeats", "skills"),
    ("previous", "skills"),
    ("script", "skills"),
    ("skills", "evolved"),
    ("bank", "skills"),
)
"""(baseline, other) comparisons, goal by goal."""


def eval_runner(
    policy: Any, bank: Any, args: argparse.Namespace, *, skip_no_op_repeats: bool = True
) -> PolicyRollouts:
    """How every arm plays the test goals: greedy, constrained, as ``skillrl eval`` does."""
    return PolicyRollouts(
        policy,
        env_id="webshop",
        bank=bank,
        max_turns=args.max_turns,
        max_new_tokens=args.max_new_tokens,
        constrained=True,
        env_config={"observation_mode": args.observation_mode},
        prompt_config=PromptConfig(max_prompt_tokens=args.max_prompt_tokens),
        count_retrievals=False,
        repair_queries=True,
        skip_no_op_repeats=skip_no_op_repeats,
    )


def play(
    policy: Any, bank: Any, args: argparse.Namespace, *, skip_no_op_repeats: bool = True
) -> tuple[list[EpisodeRecord], Stopwatch]:
    """The test goals, greedy and constrained, with ``bank`` (None: no entries)."""
    runner = eval_runner(policy, bank, args, skip_no_op_repeats=skip_no_op_repeats)
    starts = [runner.start("test", i, seed=args.seed + i) for i in range(args.eval_goals)]
    if policy.prefix_cache is not None:
        policy.prefix_cache.clear()
    with Stopwatch() as clock:
        episodes = runner.run(starts, temperature=0.0, sampling_seed=args.seed)
    return episodes, clock


def arm_row(arm: str, episodes: list[EpisodeRecord], clock: Stopwatch, before: dict) -> dict:
    r = row(0, episodes, clock.wall, before)
    del r["budget"]
    turns = sum(e.num_turns for e in episodes)
    skill_turns = [len(t.retrieved_ids) for e in episodes for t in e.turns]
    return {
        "arm": arm,
        **r,
        "cpu_seconds_per_turn": clock.cpu / max(turns, 1),
        "entries_per_turn": sum(skill_turns) / max(len(skill_turns), 1),
        "turns_with_an_entry": sum(n > 0 for n in skill_turns) / max(len(skill_turns), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="default: the shipped WebShop adapter")
    parser.add_argument("--baseline-model", default=None,
                        help="the no-skill adapter, arms (d) and (f)")  # fmt: skip
    parser.add_argument("--arms", default=",".join(ARMS), help=f"any of {','.join(ARMS)}")
    parser.add_argument("--observation-mode", default="text_rich", help="WebShop page text")
    parser.add_argument("--eval-goals", type=int, default=300, help="test goals 0..N-1")
    parser.add_argument("--donors", type=int, default=200, help="training goals placebo draws on")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--max-prompt-tokens", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workspace", default=None, help="bank folder (default: a fresh one)")
    parser.add_argument("--evolved-workspace", default=None,
                        help="arm (h): a training run's workspace (its bank)")  # fmt: skip
    parser.add_argument("--bank-workspace", default=None,
                        help="arm (i): another workspace's bank")  # fmt: skip
    parser.add_argument("--bank-label", default="another bank",
                        help="what arm (i)'s bank holds, for the report")  # fmt: skip
    parser.add_argument("--out", required=True, help="results JSON (written after each arm)")
    parser.add_argument("--resume", action="store_true", help="skip the arms --out holds")
    parser.add_argument("--sensitivity-goals", type=int, default=100,
                        help="test goals 0..N-1 played once more with every open turn re-scored "
                        "with placebo entries (skillrl.sensitivity); 0: skip")  # fmt: skip
    args = parser.parse_args()
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise SystemExit(f"--arms: unknown {unknown}; choose from {list(ARMS)}")
    if {"baseline", "previous"} & set(arms) and not args.baseline_model:
        raise SystemExit("--baseline-model: arms baseline and previous play it; name a model")
    if "evolved" in arms and not args.evolved_workspace:
        raise SystemExit("--evolved-workspace: arm evolved plays its bank; name a workspace")
    if "bank" in arms and not args.bank_workspace:
        raise SystemExit("--bank-workspace: arm bank plays its bank; name a workspace")
    model = args.model or str(shipped_adapter("webshop"))
    out = Path(args.out)
    if args.resume and out.exists():
        results = json.loads(out.read_text(encoding="utf-8"))
    else:
        kept = portable_arguments(vars(args))
        results = {"provenance": provenance(NAME), "args": kept, "rows": [], "episodes": {}}
        results["no_op_repeats_skipped"] = True
    results["model"] = portable_command(model)
    workspace = Path(args.workspace or tempfile.mkdtemp(prefix="skill-value-"))
    bank = SkillBank.open(BankConfig(workspace=workspace))
    seed_bank_if_empty(bank, "webshop")
    results["bank_entries"] = bank.count()
    results["bank_cases"] = bank.count(kind="case")
    env_config = {"observation_mode": args.observation_mode}
    placebo = PlaceboRetrieval(bank, donor_tasks("webshop", env_config, args.donors))
    evolved = evolved_bank(args.evolved_workspace) if "evolved" in arms else None
    if evolved is not None:
        results["evolved_bank_entries"] = evolved.count()
        results["evolved_bank_cases"] = evolved.count(kind="case")
    other = evolved_bank(args.bank_workspace, "--bank-workspace") if "bank" in arms else None
    if other is not None:
        results["other_bank_entries"] = other.count()
        results["other_bank_cases"] = other.count(kind="case")
    loaded: dict[str, Any] = {}
    for arm in arms:
        if arm in results["episodes"]:
            continue
        if arm == "script":
            before = machine()
            with Stopwatch() as clock:
                episodes = scripted_episodes(args)
            r = {"arm": arm, **row(0, episodes, clock.wall, before)}
            del r["budget"]
            results["rows"] = [x for x in results["rows"] if x["arm"] != arm] + [r]
            results["episodes"][arm] = [_compact(e) for e in episodes]
            write_result(out, results, name=NAME)
            continue
        path = args.baseline_model if arm in ("baseline", "previous") else model
        if path not in loaded:
            loaded.clear()  # one policy in memory at a time
            loaded[path] = load_policy(
                PolicyConfig(
                    backend="transformers", model=path, dtype="float32", threads=args.threads
                )
            )
            warm = argparse.Namespace(**{**vars(args), "eval_goals": 1, "max_turns": 2})
            play(loaded[path], bank, warm)
        sources = {"skills": bank, "repeats": bank, "placebo": placebo, "previous": bank}
        source = {"evolved": evolved, "bank": other}.get(arm) or sources.get(arm)
        before = machine()
        episodes, clock = play(loaded[path], source, args, skip_no_op_repeats=arm != "repeats")
        r = arm_row(arm, episodes, clock, before)
        if arm == "placebo":
            r["placebo_shortfall"] = placebo.shortfall
        print(
            f"{arm}: {r['successes']}/{r['goals']}, score {r['mean_score']:.3f}, "
            f"{r['seconds_per_turn']:.2f} s/turn wall, {r['cpu_seconds_per_turn']:.2f} CPU, "
            f"{r['entries_per_turn']:.2f} entries/turn ({machine_text(before)} before)",
            flush=True,
        )
        results["rows"] = [x for x in results["rows"] if x["arm"] != arm] + [r]
        results["episodes"][arm] = [_compact(e) for e in episodes]
        write_result(out, results, name=NAME)
    if args.sensitivity_goals and "sensitivity" not in results and "skills" in arms:
        if model not in loaded:
            loaded.clear()
            loaded[model] = load_policy(
                PolicyConfig(
                    backend="transformers", model=model, dtype="float32", threads=args.threads
                )
            )
        results["sensitivity"] = sensitivity(loaded[model], bank, placebo, args)
        print(f"sensitivity: {results['sensitivity']['overall']}", flush=True)
        write_result(out, results, name=NAME)
    bank.close()
    for copied in (evolved, other):
        if copied is not None:
            copied.close()
    played = {arm: [_record(e) for e in eps] for arm, eps in results["episodes"].items()}
    results["paired"] = [
        {"baseline": a, "other": b, **paired(played[a], played[b])}
        for a, b in PAIRS
        if a in played and b in played
    ]
    novel = novel_goal_ids(args)
    results["novel_goals"] = len(novel)
    if "placebo" in played and "skills" in played and novel:
        results["paired_novel"] = paired(
            [e for e in played["placebo"] if e.goal_id in novel],
            [e for e in played["skills"] if e.goal_id in novel],
        )
        results["paired_known"] = paired(
            [e for e in played["placebo"] if e.goal_id not in novel],
            [e for e in played["skills"] if e.goal_id not in novel],
        )
    write_result(out, results, name=NAME)


def sensitivity(policy: Any, bank: Any, placebo: Any, args: argparse.Namespace) -> dict:
    """Play the first ``--sensitivity-goals`` goals with the bank, every open turn re-scored with
    placebo entries; the share of turns whose greedy action changes and the mean KL, overall and
    per page type."""
    from skillrl.agents.expert import ExpertAgent
    from skillrl.sensitivity import SensitivityProbe

    probes: list[SensitivityProbe] = []

    def wrap(agent: Any) -> SensitivityProbe:
        # The scripted expert watches: a changed turn is a win for the entries when only their
        # action is the expert's; asked again with the placebo entries, it says which turns the
        # entries decide.
        probes.append(SensitivityProbe(agent, placebo, reference=ExpertAgent(args.max_turns)))
        return probes[-1]

    runner = eval_runner(policy, bank, args)
    starts = [runner.start("test", i, seed=args.seed + i) for i in range(args.sensitivity_goals)]
    runner.run(starts, temperature=0.0, sampling_seed=args.seed, wrap=wrap)
    return {"goals": args.sensitivity_goals, **probes[0].report.to_dict()}


def evolved_bank(workspace: str, option: str = "--evolved-workspace") -> SkillBank:
    """The bank of a workspace (a training run's), opened from a temporary copy (its own files
    are only read)."""
    import shutil

    source = Path(workspace)
    if not (source / "bank.sqlite").is_file():
        raise SystemExit(f"{option}: {workspace} holds no bank.sqlite")
    copy = Path(tempfile.mkdtemp(prefix="evolved-bank-"))
    shutil.copy2(source / "bank.sqlite", copy / "bank.sqlite")
    if (source / "chroma").is_dir():
        shutil.copytree(source / "chroma", copy / "chroma", ignore=shutil.ignore_patterns("*.lock"))
    return SkillBank.open(BankConfig(workspace=copy))


def scripted_episodes(args: argparse.Namespace) -> list[EpisodeRecord]:
    """The scripted "first result + goal options" policy on the same test goals."""
    from bench_train_cycles import first_result_with_options

    options = [f"observation_mode={args.observation_mode}"]
    script = argparse.Namespace(env_option=options, max_turns=args.max_turns,
                                eval_goals=args.eval_goals)  # fmt: skip
    return first_result_with_options(script)


def novel_goal_ids(args: argparse.Namespace) -> set[str]:
    """Ids of the test goals played whose product no training goal asks for."""
    import envs

    world = envs.make("webshop", observation_mode=args.observation_mode).world
    trained = {world.goals[i].asin for i in world.split("train")}
    tested = [world.goals[i] for i in list(world.split("test"))[: args.eval_goals]]
    return {g.goal_id for g in tested if g.asin not in trained}


def _compact(episode: EpisodeRecord) -> dict:
    """The episode without its token ids and log-probs (what a comparison needs, kept small)."""
    data = episode.to_dict()
    data["agent"] = portable_command(data["agent"])  # names the model's folder
    for turn in data["turns"]:
        for key in ("prompt_token_ids", "completion_token_ids", "completion_logprobs"):
            turn[key] = None
    return data


def _record(data: dict) -> EpisodeRecord:
    return EpisodeRecord.from_dict(data)


def report(results: dict) -> str:
    """A results file as Markdown: each arm's figures, then the goal-by-goal comparisons."""
    args = results["args"]
    rows = {r["arm"]: r for r in results["rows"]}
    none = rows.get("none")
    lines = [
        run_text(results),
        "",
        f"Test goals 0-{args['eval_goals'] - 1}, greedy, constrained, fp32, at most "
        f"{args['max_turns']} turns, `observation_mode={args['observation_mode']}`, "
        f"{args['max_prompt_tokens']}-token prompts; "
        + (
            "decoding leaves out a repeated no-op (arms a-d); "
            if results.get("no_op_repeats_skipped")
            else "decoding may repeat a no-op (run before that rule); "
        )
        + "the bank: the seeded starting bank "
        f"({results['bank_entries']} entries"
        + (f", {results['bank_cases']} of them cases" if "bank_cases" in results else "")
        + ")"
        + (
            f"; placebo entries drawn for {args['donors']} training goals of other categories"
            if "placebo" in rows
            else ""
        )
        + (
            f"; arm (h): the bank a training run evolved ({results['evolved_bank_entries']} "
            f"entries, {results['evolved_bank_cases']} of them cases)"
            if "evolved_bank_entries" in results
            else ""
        )
        + (
            f"; arm (i): {args.get('bank_label') or 'another bank'} "
            f"({results['other_bank_entries']} entries, {results['other_bank_cases']} of them "
            "cases)"
            if "other_bank_entries" in results
            else ""
        )
        + ".",
        "",
        "| arm | success | 95% interval | mean score | mean turns | entries/turn "
        "| prompt tokens/turn | s/turn (wall / CPU) | CPU vs (c) | matmul GFLOP/s, load before |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for arm in ARMS:
        r = rows.get(arm)
        if r is None:
            continue
        m = r["machine"]
        if arm == "script":  # no model: only its outcomes compare
            lines.append(
                f"| {LABELS[arm]} | {r['successes']}/{r['goals']} "
                f"| [{r['interval'][0]:.2f}, {r['interval'][1]:.2f}] | {r['mean_score']:.3f} "
                "| - | - | - | - | - | - |"
            )
            continue
        ratio = f"{r['cpu_seconds_per_turn'] / none['cpu_seconds_per_turn']:.2f}x" if none else "-"
        lines.append(
            f"| {LABELS[arm]} | {r['successes']}/{r['goals']} "
            f"| [{r['interval'][0]:.2f}, {r['interval'][1]:.2f}] | {r['mean_score']:.3f} "
            f"| {r['mean_turns']:.1f} | {r['entries_per_turn']:.2f} "
            f"| {r['prompt_tokens_per_turn']:.0f} "
            f"| {r['seconds_per_turn']:.2f} / {r['cpu_seconds_per_turn']:.2f} | {ratio} "
            f"| {m['matmul_gflops']:.0f}, {m['load_average']:.2f} |"
        )
    if results.get("paired"):
        lines += [
            "",
            "| goal by goal | success | lost / won | McNemar p | score difference (95%) | |",
            "| --- | --- | ---: | ---: | ---: | --- |",
        ]
    for p in results.get("paired", []):
        resolved = "resolved" if p["mcnemar_p"] < 0.05 else "not resolved"
        name = f"({LABELS[p['baseline']][1]}) -> ({LABELS[p['other']][1]})"
        lines.append(f"| {name} {paired_cells(p)} {resolved} |")
    for key, which in (("paired_known", "known"), ("paired_novel", "novel")):
        p = results.get(key)
        if p is None:
            continue
        resolved = "resolved" if p["mcnemar_p"] < 0.05 else "not resolved"
        label = (
            f"(b) -> (a), the {results['novel_goals']} goals whose product no training goal "
            "asks for"
            if which == "novel"
            else "(b) -> (a), the goals whose product some training goal asks for"
        )
        lines.append(f"| {label} {paired_cells(p)} {resolved} |")
    sense = results.get("sensitivity")
    if sense:
        lines += [
            "",
            f"Skill sensitivity (test goals 0-{sense['goals'] - 1}, arm (a)'s states): every turn "
            "whose choice is open, re-scored with placebo entries.",
            "",
            "| page | open turns | greedy action changed | mean KL(own, placebo) "
            "| changes won / lost (the expert's action) | the expert's action changed "
            "| of those, the policy's changed too |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        pages = {"all": sense["overall"], **sense["by_page"]}
        for page, f in pages.items():
            verdict = f"{f['changes_won']} / {f['changes_lost']}" if "changes_won" in f else "-"
            lines.append(
                f"| {page} | {f['turns']} | {f['changed_share']:.2f} | {f['mean_kl']:.3f} "
                f"| {verdict} | {reference_cells(f)} |"
            )
    return "\n".join(lines)


def reference_cells(figures: dict) -> str:
    """The share of open turns whose expert action the swap changes (the turns the entries
    decide), and the share of those where the policy's changed too; "-" where not measured."""
    asked = figures.get("reference_asked", 0)
    if not asked:
        return "- | -"
    changes = figures["reference_changes"]
    followed = f"{figures['reference_changes_followed'] / changes:.2f}" if changes else "-"
    return f"{changes / asked:.2f} | {followed}"


if __name__ == "__main__":
    main()
