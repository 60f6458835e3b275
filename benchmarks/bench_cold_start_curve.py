"""Cold start at scale: test success after every round, against examples and minutes.

    python benchmarks/bench_cold_start_curve.py --out curve.json --goals 200 --dagger-rounds 4 \\
        --dagger-goals 48 --dagger-keep mistakes --dagger-replay 1 --lora-layers 15

One cold-start run (behaviour cloning, then DAgger rounds), evaluated after every round on the
fixed test goals ``--eval-goals`` names (N: goals 0..N-1; FIRST-LAST: goals FIRST to LAST;
greedy, constrained, the run's own skills setting and turn cap). The recipe's own time
(gathering examples, DAgger rollouts and labels, fine-tuning, the model load) is counted apart
from the evaluations, which only measure it. Baselines in the same run, on the same goals and
turn cap: the scripted expert and, on WebShop, "open the first result, click the goal's options,
buy" (which reads nothing). ``--env sokoban --env-option categories=6x6-1box`` runs the same
recipe on Sokoban's 6x6 one-box rooms with the A* expert as teacher. Every figure is printed
beside the machine's fp32 matmul rate and load average, measured before each evaluation.

Results go to ``--out`` (JSON) after every round, and each round's test episodes to
``<out>.episodes/round-NNNN.jsonl`` (what the failure classifier reads); ``--resume`` continues
the run (in ``--workspace``) where it stopped and evaluates any round still missing.
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

from bench_expert import FirstResultWithOptions  # noqa: E402
from harness import Stopwatch, command, machine, provenance, write_result  # noqa: E402

import envs  # noqa: E402
from envs.webshop.failures import FAILURE_CLASSES, FAILURE_LABELS, classify_failures  # noqa: E402
from skillrl.agents.expert import ExpertAgent  # noqa: E402
from skillrl.policies import PolicyConfig, load_policy  # noqa: E402
from skillrl.prompts import PromptConfig  # noqa: E402
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine  # noqa: E402
from skillrl_core.errors import ConfigError  # noqa: E402
from skillrl_core.files import atomic_write_text  # noqa: E402
from skillrl_core.goal_range import FORMS, GoalRange, parse_goal_range  # noqa: E402
from skillrl_core.significance import mcnemar_exact  # noqa: E402
from trainers.cold_start.cold_start import ColdStartPhase, ColdStartRun  # noqa: E402
from trainers.cold_start.round_metrics import RoundMetrics  # noqa: E402
from trainers.cold_start.sft_config import ColdStartConfig  # noqa: E402
from trainers.common.episode_metrics import summarise, wilson_interval  # noqa: E402
from trainers.common.phased_run import PhaseEnded  # noqa: E402
from trainers.common.policy_rollouts import PolicyRollouts  # noqa: E402


def figures(episodes: list[Any]) -> dict[str, Any]:
    """Success (Wilson 95%), score and turns of one evaluation."""
    s = summarise(episodes)
    successes = sum(e.success for e in episodes)
    low, high = wilson_interval(successes, len(episodes))
    return {
        "episodes": s.episodes,
        "successes": successes,
        "success_rate": s.success_rate,
        "success_ci95": [low, high],
        "mean_score": s.mean_score,
        "mean_turns": s.mean_turns,
        "invalid_action_rate": s.invalid_action_rate,
        "per_goal_success": [bool(e.success) for e in episodes],
    }


def scripted(agent_factory: Any, goals: GoalRange, max_turns: int) -> dict[str, Any]:
    """Success of a scripted policy (``act(obs, info)``) on the test goals ``goals`` at the cap."""
    env = envs.make("webshop", max_turns=max_turns)
    outcomes, scores, turns = [], [], []
    for index in goals.indices():
        obs, info = env.reset(seed=index, options={"split": "test", "goal_index": index})
        policy = agent_factory()
        policy.reset(info)
        steps, reward = 0, 0.0
        while True:
            obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
            steps += 1
            if terminated or truncated:
                break
        outcomes.append(bool(info["success"]))
        scores.append(float(reward))
        turns.append(steps)
    count = goals.count
    low, high = wilson_interval(sum(outcomes), count)
    return {
        "successes": sum(outcomes),
        "episodes": count,
        "success_rate": sum(outcomes) / count,
        "success_ci95": [low, high],
        "mean_score": sum(scores) / count,
        "mean_turns": sum(turns) / count,
        "per_goal_success": outcomes,
    }


def env_options(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` environment options, read as the CLI's ``--env-option`` reads them."""
    import click

    from skillrl_cli.options import parse_env_options

    try:
        return parse_env_options(pairs)
    except click.BadParameter as error:
        raise SystemExit(f"--env-option: {error.message}") from error


def failure_counts(env_id: str, episodes: list[Any]) -> dict[str, int]:
    """Failed episodes per class (WebShop's classifier; other environments have none)."""
    return classify_failures(episodes).counts() if env_id == "webshop" else {}


def cold_start_config(a: argparse.Namespace) -> ColdStartConfig:
    """Return the ColdStartConfig the benchmark's options describe."""
    return ColdStartConfig(
        env_id=a.env,
        goals=a.goals,
        dagger_rounds=a.dagger_rounds,
        dagger_goals=a.dagger_goals,
        dagger_keep=a.dagger_keep,
        dagger_replay=a.dagger_replay,
        skills=a.skills,
        constrained=True,
        max_turns=a.max_turns,
        num_train_epochs=a.epochs,
        learning_rate=a.lr,
        lora_r=a.lora_r,
        lora_alpha=2 * a.lora_r,
        lora_layers=a.lora_layers,
        use_peft=True,
        seed=a.seed,
    )


class Curve:
    """Runs the cold start and evaluates the policy after each of its rounds."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.episodes_dir = Path(f"{self.out}.episodes")
        self.workspace = Path(args.workspace or f"{self.out}.workspace")
        self.results: dict[str, Any] = {"rounds": {}, "baselines": {}}
        if args.resume and self.out.exists():
            self.results.update(json.loads(self.out.read_text()))
        self.results["config"] = {k: v for k, v in vars(args).items() if k != "resume"}
        self.results["command"] = command("cold_start_curve")  # this call's (a resume's) own
        self.results.setdefault("provenance", provenance("cold_start_curve"))  # the first call's
        self.eval_seconds = 0.0

    def save(self) -> None:
        write_result(self.out, self.results, name="cold_start_curve")

    def env_config(self) -> dict[str, Any]:
        """The environment options the policy trains and is evaluated under."""
        return {**env_options(self.args.env_option), "max_turns": self.args.max_turns}

    def eval_goals(self) -> GoalRange:
        """The test goals every evaluation plays (``--eval-goals``), within the test split."""
        size = envs.adapter_for(self.args.env).split_size("test", self.env_config())
        return parse_goal_range(self.args.eval_goals, size, "test", option="--eval-goals")

    def starts(self) -> list[EpisodeStart]:
        env_config = self.env_config()
        return [
            EpisodeStart(self.args.env, "test", i, seed=i, env_config=env_config)
            for i in self.eval_goals().indices()
        ]

    def config(self) -> ColdStartConfig:
        return cold_start_config(self.args)

    def baselines(self) -> None:
        a = self.args
        if "expert" not in self.results["baselines"]:
            engine = RolloutEngine(
                ExpertAgent(max_turns=a.max_turns),
                config=RolloutConfig(max_turns=a.max_turns, count_retrievals=False),
            )
            self.results["baselines"]["expert"] = figures(engine.run(self.starts()))
        if a.env == "webshop" and "first_result_options" not in self.results["baselines"]:
            self.results["baselines"]["first_result_options"] = scripted(
                FirstResultWithOptions, self.eval_goals(), a.max_turns
            )
        self.save()
        for name, row in self.results["baselines"].items():
            print(f"baseline {name}: {_line(row)}", flush=True)

    def episodes_file(self, round_index: int) -> Path:
        return self.episodes_dir / f"round-{round_index:04d}.jsonl"

    def stored(self, round_index: int) -> dict[str, Any]:
        """Figures of an evaluation whose episodes were saved (its timing was not)."""
        from skillrl_core.records import EpisodeRecord

        lines = self.episodes_file(round_index).read_text().splitlines()
        episodes = [EpisodeRecord.from_dict(json.loads(line)) for line in lines if line]
        row = figures(episodes)
        row["failures"] = failure_counts(self.args.env, episodes)
        return row

    def evaluate(self, run: ColdStartRun, round_index: int) -> None:
        key = str(round_index)
        if key in self.results["rounds"] and "success_rate" in self.results["rounds"][key]:
            return
        a = self.args
        before = machine()
        runner = PolicyRollouts(
            run.policy,
            env_id=a.env,
            bank=run.bank,
            max_turns=a.max_turns,
            constrained=True,
            prompt_config=run.prompt_config,
            count_retrievals=False,
        )
        with Stopwatch() as clock:
            episodes = runner.run(self.starts(), temperature=0.0)
        seconds = clock.wall
        self.eval_seconds += seconds
        self.episodes_dir.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(_slim(e.to_dict())) for e in episodes]
        atomic_write_text(self.episodes_file(round_index), "\n".join(lines))
        row = figures(episodes)
        row.update(
            {
                "eval_seconds": seconds,
                "eval_cpu_seconds": clock.cpu,
                "seconds_per_turn": seconds / max(sum(e.num_turns for e in episodes), 1),
                "machine_before_eval": before,
                "failures": failure_counts(self.args.env, episodes),
            }
        )
        row.update(self.cost_through(run, round_index))
        self.results["rounds"][key] = row
        self.save()
        print(f"round {round_index}: {_line(row)}  [{_cost(row)}]", flush=True)

    def cost_through(self, run: ColdStartRun, round_index: int) -> dict[str, Any]:
        """What the recipe spent through ``round_index`` (its own phases, no evaluation)."""
        if round_index < 0 or not run.exists():
            return {}
        state = run.load_state()
        rounds = [RoundMetrics.from_row(h) for h in state.history if h["round"] <= round_index]
        seconds = sum(m.seconds for m in rounds)
        cpu = sum(m.cpu_seconds for m in rounds)
        seen = sum(m.train.examples * self.args.epochs for m in rounds if m.train)
        last = rounds[-1] if rounds else RoundMetrics(round_index)  # none measured yet
        data, train, dagger = last.data, last.train, last.dagger
        return {
            "recipe_seconds": seconds + self.results.get("model_load_seconds", 0.0),
            "recipe_cpu_seconds": cpu,
            "examples_seen": seen,
            "dataset_examples": data.dataset_examples if data else None,
            "round_examples": train.examples if train else None,
            "train_loss": train.loss if train else None,
            "dagger_states": dagger.states if dagger else None,
            "dagger_mistakes": dagger.mistakes if dagger else None,
            "dagger_success_rate": dagger.success_rate if dagger else None,
        }

    def run(self) -> None:
        a = self.args
        # Older files hold only this key; a new run's is its provenance's (measured once).
        self.results.setdefault("machine_at_start", self.results["provenance"]["machine_at_start"])
        self.baselines()
        with Stopwatch() as clock:
            policy = load_policy(
                PolicyConfig(model=a.model, dtype="float32", device="cpu", threads=a.threads)
            )
        self.results.setdefault("model_load_seconds", clock.wall)
        bank = None
        if a.skills:
            from memory import BankConfig, SkillBank
            from skillrl.distill.seeding import seed_bank_if_empty

            bank = SkillBank.open(BankConfig(workspace=self.workspace))
            seed_bank_if_empty(bank, a.env)
        run = ColdStartRun(
            self.config(),
            policy=policy,
            run_dir=self.workspace / "runs" / "curve" / "sft",
            prompt_config=PromptConfig(max_prompt_tokens=a.max_prompt_tokens),
            bank=bank,
            env_config=self.env_config(),
        )
        if "base" not in self.results and self.episodes_file(-1).exists():
            self.results["base"] = self.stored(-1)  # evaluated before a kill: not played again
            self.save()
        if not a.no_base and "base" not in self.results:
            self.evaluate(run, -1)
            self.results["base"] = self.results["rounds"].pop("-1")
            self.save()

        def evaluate_round(event: PhaseEnded) -> None:
            if event.phase is ColdStartPhase.TRAIN:
                self.evaluate(run, event.index)

        run.events.on(PhaseEnded, evaluate_round)
        run.run(resume=run.exists())
        for r in range(run.config.rounds):  # a kill between a round's end and its evaluation
            if str(r) not in self.results["rounds"]:
                run._load_weights(run.checkpoint(r))
                self.evaluate(run, r)
        self.results["final_checkpoint"] = str(run.final_checkpoint)
        self.save()  # with machine_at_end, as every save
        if bank is not None:
            bank.close()
        print(report(self.results), flush=True)


def _paired(before: list[bool], after: list[bool]) -> str:
    lost = sum(b and not a for b, a in zip(before, after, strict=True))
    won = sum(a and not b for b, a in zip(before, after, strict=True))
    p = mcnemar_exact(lost, won)
    verdict = "resolved" if p < 0.05 else "not resolved"
    return f"{sum(before)} -> {sum(after)} | {lost} / {won} | {p:.3g} | {verdict}"


def rows_named(rounds: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    """``(round key, name)`` of every evaluated round."""
    return [
        (key, "behaviour cloning" if key == "0" else f"DAgger round {key}") for key, _ in rounds
    ]


def report(results: dict[str, Any]) -> str:
    """The benchmark's tables as Markdown: the learning curve, paired comparisons, failures."""
    rounds = sorted(results["rounds"].items(), key=lambda item: int(item[0]))
    out = ["| after | examples seen | recipe minutes (wall / CPU) | test success | 95% interval "
           "| mean score | mean turns | matmul GFLOP/s, load |",
           "| --- | ---: | ---: | ---: | --- | ---: | ---: | --- |"]  # fmt: skip
    base = results.get("base")
    names = dict(rows_named(rounds))
    rows = ([("base model", base)] if base else []) + [(names[key], row) for key, row in rounds]
    for name, row in rows:
        low, high = row["success_ci95"]
        seconds, cpu = row.get("recipe_seconds"), row.get("recipe_cpu_seconds")
        cost = f"{seconds / 60:.1f} / {cpu / 60:.1f}" if seconds is not None else "-"
        m = row.get("machine_before_eval")
        where = f"{m['matmul_gflops']:.0f}, {m['load_average']:.2f}" if m else "-"
        out.append(
            f"| {name} | {row.get('examples_seen', 0):.0f} | {cost} | {row['successes']}/"
            f"{row['episodes']} | [{low:.2f}, {high:.2f}] | {row['mean_score']:.3f} | "
            f"{row['mean_turns']:.1f} | {where} |"
        )
    for name, row in results["baselines"].items():
        low, high = row["success_ci95"]
        out.append(
            f"| {name.replace('_', ' ')} (same run) | - | - | {row['successes']}/{row['episodes']}"
            f" | [{low:.2f}, {high:.2f}] | {row['mean_score']:.3f} | {row['mean_turns']:.1f} | - |"
        )
    if rounds:
        shipped_key = str(results.get("shipped_round", rounds[-1][0]))
        shipped = results["rounds"][shipped_key]
        name_of = dict(rows_named(rounds))
        out += ["", f"| comparison, goal by goal (shipped: {name_of[shipped_key]}) | success "
                "| lost / won | McNemar p | |", "| --- | --- | ---: | ---: | --- |"]  # fmt: skip
        pairs = [(f"base model -> {name_of[shipped_key]}", base, shipped)] if base else []
        pairs += [
            (f"{name.replace('_', ' ')} -> {name_of[shipped_key]}", row, shipped)
            for name, row in results["baselines"].items()
        ]
        pairs += [
            (f"{name_of[before[0]]} -> {name_of[after[0]]}", before[1], after[1])
            for before, after in zip(rounds, rounds[1:], strict=False)
        ]
        for name, first, second in pairs:
            line = _paired(first["per_goal_success"], second["per_goal_success"])
            out.append(f"| {name} | {line} |")
        if not any(row.get("failures") for _, row in rows):
            return "\n".join(out)  # an environment without a failure classifier
        out += ["", "| failure class | " + " | ".join(n for n, _ in rows) + " |",
                "| --- |" + " ---: |" * len(rows)]  # fmt: skip
        for kind in FAILURE_CLASSES:
            counts = [row.get("failures", {}).get(kind, 0) for _, row in rows]
            if any(counts):
                out.append(f"| {FAILURE_LABELS[kind]} | " + " | ".join(map(str, counts)) + " |")
    return "\n".join(out)


def recipe(config: dict[str, Any], rank: int) -> str:
    """Return the ``skillrl sft`` command that trains what this benchmark trained."""
    dagger = (
        f"--dagger-rounds {config['dagger_rounds']} --dagger-goals {config['dagger_goals']} "
        f"--dagger-keep {config['dagger_keep']} --dagger-replay {config['dagger_replay']:g} "
        if config["dagger_rounds"]
        else ""
    )
    options = "".join(f"--env-option {pair} " for pair in config.get("env_option", []))
    return (
        f"skillrl sft --env {config.get('env', 'webshop')} --no-skills --goals {config['goals']} "
        f"{dagger}{options}"
        f"--lora-layers {config['lora_layers']} --lora-r {config['lora_r']} "
        f"--epochs {config['epochs']:g} --lr {config['lr']:g} --max-turns {config['max_turns']} "
        f"--max-prompt-tokens {config['max_prompt_tokens']} --seed {config['seed']} "
        f"--adapter-rank {rank}"
    )


def ship(results: dict[str, Any], folder: Path, rank: int, round_index: int) -> str:
    """Export round ``round_index``'s model as the adapter the package ships, with its figures.

    The recipe recorded with it is the command that trains through that round (a run of
    ``round_index`` DAgger rounds is the same run stopped there).
    """
    from trainers.cold_start.adapter_export import export_checkpoint
    from trainers.cold_start.cold_start import settings_of

    config = {"env": "webshop", **results["config"], "dagger_rounds": round_index}
    final = results["rounds"][str(round_index)]
    workspace = Path(results["config"]["workspace"] or f"{results['config']['out']}.workspace")
    checkpoint = workspace / "runs" / "curve" / "sft" / "checkpoints" / f"round-{round_index:04d}"
    settings = settings_of(
        cold_start_config(argparse.Namespace(**config)),
        int(config["max_prompt_tokens"]),
        env_options(config.get("env_option", [])),
        recipe=recipe(config, rank),
        figures={
            "test_goals": final["episodes"],
            "test_successes": final["successes"],
            "test_success_ci95": final["success_ci95"],
            "test_mean_score": final["mean_score"],
            "max_turns": config["max_turns"],
            "decoding": "greedy, constrained",
            "recipe_wall_minutes": final["recipe_seconds"] / 60,
            "matmul_gflops": final["machine_before_eval"]["matmul_gflops"],
            "benchmark": results["command"],
        },
    )
    done = export_checkpoint(config["model"], checkpoint, folder, rank=rank, settings=settings)
    return (
        f"{done.folder}: rank {done.rank}, {done.layers} layers ({done.modules} modules), "
        f"{done.bytes / 2**20:.1f} MiB, "
        f"keeps {100 * done.kept_energy:.3f}% of the weight change"
    )


def _slim(record: dict[str, Any]) -> dict[str, Any]:
    for turn in record.get("turns", []):
        for key in ("prompt_token_ids", "completion_token_ids", "completion_logprobs"):
            turn.pop(key, None)
    return record


def _line(row: dict[str, Any]) -> str:
    low, high = row["success_ci95"]
    return (
        f"success {row['successes']}/{row['episodes']} [{low:.2f}, {high:.2f}]  score "
        f"{row['mean_score']:.3f}  turns {row['mean_turns']:.1f}"
    )


def _cost(row: dict[str, Any]) -> str:
    m = row["machine_before_eval"]
    recipe = (
        f"recipe {row['recipe_seconds'] / 60:.1f} min wall, {row['recipe_cpu_seconds'] / 60:.1f} "
        f"CPU min, {row['examples_seen']:.0f} examples seen; "
        if "recipe_seconds" in row
        else ""  # the base model: no recipe ran yet
    )
    return (
        f"{recipe}eval {row['eval_seconds']:.0f} s; matmul {m['matmul_gflops']:.0f} GFLOP/s, "
        f"load {m['load_average']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="results JSON (written after each round)")
    parser.add_argument(
        "--workspace", default=None, help="the run's folder (default <out>.workspace)"
    )
    parser.add_argument(
        "--eval-goals", default="100", help=f"the fixed test goals evaluated: {FORMS}"
    )
    parser.add_argument("--env", default="webshop", help="environment id")
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--max-prompt-tokens", type=int, default=512)
    parser.add_argument("--goals", type=int, default=200, help="behaviour-cloning goals")
    parser.add_argument("--dagger-rounds", type=int, default=4)
    parser.add_argument("--dagger-goals", type=int, default=48)
    parser.add_argument("--dagger-keep", default="mistakes", choices=["all", "mistakes"])
    parser.add_argument("--dagger-replay", type=float, default=1.0)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--lora-r", type=int, default=16)
    parser.add_argument("--lora-layers", type=int, default=15)
    parser.add_argument("--skills", action="store_true", help="examples and evaluation with skills")
    parser.add_argument(
        "--env-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment option for training and evaluation (repeatable), e.g. "
        "observation_mode=text_rich; the scripted baselines play the default environment",
    )
    parser.add_argument("--no-base", action="store_true", help="skip evaluating the base model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--report", action="store_true", help="print the tables of --out and stop")
    parser.add_argument(
        "--ship",
        default=None,
        help="write the run's final model as a LoRA adapter into this folder (with the settings "
        "it was trained under, the recipe and its figures) and stop",
    )
    parser.add_argument("--adapter-rank", type=int, default=64)
    parser.add_argument("--ship-round", type=int, default=0, help="which round's model to ship")
    args = parser.parse_args()
    if args.ship:
        results = json.loads(Path(args.out).read_text())
        print(ship(results, Path(args.ship), args.adapter_rank, args.ship_round))
        return
    if args.report:
        print(report(json.loads(Path(args.out).read_text())))
        return
    curve = Curve(args)
    try:
        curve.eval_goals()  # a bad --eval-goals is refused before anything plays or loads
    except ConfigError as error:
        raise SystemExit(f"error: {error}") from error
    curve.run()


if __name__ == "__main__":
    main()
