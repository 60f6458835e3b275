"""Cold start on WebShop: base model vs behaviour cloning vs BC + DAgger, with and without skills,
beside the scripted expert at the same turn limit, on the same fixed test goals.

    python benchmarks/bench_cold_start.py --out cold_start.json --goals 50 \\
        --sft-goals 64 --dagger-rounds 2 --dagger-goals 32

Evaluation is greedy and constrained, on test goals 0..N-1 (training only ever sees training
goals). A policy trained with skills is evaluated with skills, one trained without, without.
For every setting: success with a 95% Wilson interval, mean score, mean turns, CPU minutes of
its evaluation (beside the machine's matmul rate and load average just before it); for every
training phase (behaviour cloning = round 0, DAgger = later rounds): CPU minutes of gathering
examples and of fine-tuning. What a cold-started policy does at other prompt budgets is
``bench_prompt_budget --model <its checkpoint>``.

Results go to ``--out`` (JSON) after every setting; ``--resume`` skips what is there and
continues the cold-start runs (in ``--workspace``) where they stopped.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from harness import (  # noqa: E402
    Stopwatch,
    machine,
    machine_text,
    provenance,
    run_text,
    write_result,
)

from memory import BankConfig, SkillBank  # noqa: E402
from skillrl.agents.expert import ExpertAgent  # noqa: E402
from skillrl.distill.seeding import seed_bank_if_empty  # noqa: E402
from skillrl.policies import PolicyConfig, load_policy  # noqa: E402
from skillrl.prompts import PromptConfig  # noqa: E402
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine  # noqa: E402
from trainers.cold_start.cold_start import ColdStartRun  # noqa: E402
from trainers.cold_start.round_metrics import RoundMetrics  # noqa: E402
from trainers.cold_start.sft_config import ColdStartConfig  # noqa: E402
from trainers.common.episode_metrics import summarise, wilson_interval  # noqa: E402
from trainers.common.policy_rollouts import PolicyRollouts  # noqa: E402

SETTINGS = ("expert", "base", "base+skills", "bc", "bc+skills", "dagger", "dagger+skills")


def figures(episodes: list[Any], cpu_seconds: float, wall_seconds: float) -> dict[str, Any]:
    """Success (Wilson 95%), score, turns and cost of one setting's episodes."""
    s = summarise(episodes)
    successes = sum(e.success for e in episodes)
    low, high = wilson_interval(successes, len(episodes))
    turns = sum(e.num_turns for e in episodes)
    return {
        "episodes": s.episodes,
        "successes": successes,
        "success_rate": s.success_rate,
        "success_ci95": [low, high],
        "mean_score": s.mean_score,
        "mean_turns": s.mean_turns,
        "invalid_action_rate": s.invalid_action_rate,
        "cpu_minutes": cpu_seconds / 60,
        "wall_minutes": wall_seconds / 60,
        "seconds_per_turn": wall_seconds / max(turns, 1),
    }


def training_figures(metrics: RoundMetrics) -> dict[str, Any]:
    """One round of a cold start as the results' ``training`` table has it."""
    data, train, dagger = metrics.data, metrics.train, metrics.dagger
    return {
        "phase": "bc" if metrics.round == 0 else f"dagger-{metrics.round}",
        "examples": data.dataset_examples if data else None,
        "gather_cpu_minutes": (data.cpu_seconds if data else 0.0) / 60,
        "train_cpu_minutes": (train.cpu_seconds if train else 0.0) / 60,
        "train_steps": train.global_step if train else None,
        "train_loss": train.loss if train else None,
        "dagger_success_rate": dagger.success_rate if dagger else None,
    }


class Bench:
    """Trains the cold-start policies on demand and evaluates every setting."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.workspace = Path(args.workspace or f"{self.out}.workspace")
        self.results: dict[str, Any] = {"settings": {}, "training": {}}
        if args.resume and self.out.exists():
            self.results.update(json.loads(self.out.read_text()))
        self.results["config"] = {k: v for k, v in vars(args).items() if k != "resume"}
        self.results.setdefault("provenance", provenance("cold_start"))  # a resume keeps the first
        self._bank: SkillBank | None = None
        self._runs: dict[tuple[bool, int], ColdStartRun] = {}

    def save(self) -> None:
        write_result(self.out, self.results, name="cold_start")

    @property
    def bank(self) -> SkillBank:
        if self._bank is None:
            self._bank = SkillBank.open(BankConfig(workspace=self.workspace))
            seed_bank_if_empty(self._bank, "webshop")
        return self._bank

    def starts(self) -> list[EpisodeStart]:
        """The fixed test goals 0..N-1, each with its env seed and this run's turn limit."""
        env_config = {"max_turns": self.args.max_turns}
        return [
            EpisodeStart("webshop", "test", i, seed=i, env_config=env_config)
            for i in range(self.args.goals)
        ]

    # -- training ----------------------------------------------------------------------
    def cold_start(self, skills: bool, dagger_rounds: int) -> ColdStartRun:
        """Run (or resume) the cold start with or without skills through ``dagger_rounds``.

        Behaviour cloning is the same run stopped after round 0, so ``bc`` is evaluated (and its
        result saved) before any DAgger round is paid for; ``dagger`` resumes that run.
        """
        if (skills, dagger_rounds) in self._runs:
            return self._runs[(skills, dagger_rounds)]
        a = self.args
        config = ColdStartConfig(
            goals=a.sft_goals,
            dagger_rounds=dagger_rounds,
            dagger_goals=a.dagger_goals,
            skills=skills,
            constrained=True,
            max_turns=a.max_turns,
            num_train_epochs=a.epochs,
            learning_rate=a.lr,
            seed=a.seed,
        )
        name = "skills" if skills else "no-skills"
        run = ColdStartRun(
            config,
            policy=self.policy(a.model),
            run_dir=self.workspace / "runs" / name / "sft",
            prompt_config=PromptConfig(max_prompt_tokens=a.max_prompt_tokens),
            bank=self.bank if skills else None,
        )
        state = run.run(resume=run.exists())
        self.results["training"][name] = [
            training_figures(RoundMetrics.from_row(row)) for row in state.history
        ]
        self.save()
        self._runs[(skills, dagger_rounds)] = run
        return run

    def policy(self, model: str) -> Any:
        return load_policy(
            PolicyConfig(model=model, dtype="float32", device="cpu", threads=self.args.threads)
        )

    def model_of(self, setting: str) -> str:
        kind, _, skills = setting.partition("+")
        if kind == "base":
            return self.args.model
        if kind == "bc":
            return str(self.cold_start(skills == "skills", 0).checkpoint(0))
        return str(self.cold_start(skills == "skills", self.args.dagger_rounds).final_checkpoint)

    # -- evaluation --------------------------------------------------------------------
    def evaluate(self, setting: str) -> dict[str, Any]:
        """Figures of one setting's evaluation, with the machine measured just before it."""
        a = self.args
        if setting == "expert":
            before = machine()
            return {**self.expert(), "machine_before_eval": before}
        model = self.model_of(setting)  # trains first if needed (not counted below)
        before = machine()
        runner = PolicyRollouts(
            self.policy(model),
            bank=self.bank if setting.endswith("+skills") else None,
            max_turns=a.max_turns,
            constrained=True,
            prompt_config=PromptConfig(max_prompt_tokens=a.max_prompt_tokens),
            count_retrievals=False,
        )
        with Stopwatch() as clock:
            episodes = runner.run(self.starts(), temperature=0.0)
        row = figures(episodes, clock.cpu, clock.wall)
        row["model"] = model
        row["model_seconds_per_turn"] = runner.timings.per_turn()["model"]
        row["machine_before_eval"] = before
        return row

    def expert(self) -> dict[str, Any]:
        a = self.args
        starts = self.starts()
        engine = RolloutEngine(
            ExpertAgent(max_turns=a.max_turns),
            config=RolloutConfig(max_turns=a.max_turns, count_retrievals=False),
        )
        with Stopwatch() as clock:
            episodes = engine.run(starts)
        return figures(episodes, clock.cpu, clock.wall)

    def run(self) -> None:
        for setting in self.args.settings.split(","):
            if setting not in SETTINGS:
                raise SystemExit(f"unknown setting {setting!r}; choose from {SETTINGS}")
            if setting in self.results["settings"]:
                continue
            self.results["settings"][setting] = self.evaluate(setting)
            self.save()
            print(setting, _line(self.results["settings"][setting]), flush=True)
        if self._bank is not None:
            self._bank.close()


def _line(row: dict[str, Any]) -> str:
    low, high = row["success_ci95"]
    return (
        f"success {row['success_rate']:.2f} [{low:.2f}, {high:.2f}]  score "
        f"{row['mean_score']:.3f}  turns {row['mean_turns']:.1f}  "
        f"{row['seconds_per_turn']:.2f} s/turn  {row['cpu_minutes']:.1f} CPU min  "
        f"[{machine_text(row['machine_before_eval'])}]"
    )


SETTING_NAMES = {
    "expert": "the scripted expert",
    "base": "base SmolLM2-135M, no skills",
    "base+skills": "base, with skills",
    "bc": "behaviour cloning (BC), no skills",
    "bc+skills": "BC, with skills",
    "dagger": "BC + DAgger, no skills",
    "dagger+skills": "BC + DAgger, with skills",
}


def report(results: dict) -> str:
    """A results file as Markdown: every setting's evaluation, then each cold start's phases."""
    config = results["config"]
    lines = [
        run_text(results),
        "",
        f"Test goals 0-{config['goals'] - 1}, greedy, constrained, at most {config['max_turns']} "
        f"turns, {config['max_prompt_tokens']}-token prompts. BC: {config['sft_goals']} training "
        f"goals, {config['epochs']:g} epochs, lr {config['lr']:g}; DAgger: "
        f"{config['dagger_rounds']} round(s) of {config['dagger_goals']} goals.",
        "",
        "| setting | success | 95% interval | mean score | mean turns | s/turn "
        "| evaluation CPU minutes | matmul GFLOP/s, load before |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for setting, row in results["settings"].items():
        low, high = row["success_ci95"]
        m = row.get("machine_before_eval", {})
        machine_cell = f"{m['matmul_gflops']:.0f}, {m['load_average']:.2f}" if m else ""
        lines.append(
            f"| {SETTING_NAMES.get(setting, setting)} | {row['successes']}/{row['episodes']} "
            f"| [{low:.2f}, {high:.2f}] | {row['mean_score']:.3f} | {row['mean_turns']:.1f} "
            f"| {row['seconds_per_turn']:.2f} | {row['cpu_minutes']:.1f} | {machine_cell} |"
        )
    lines += [
        "",
        "| cold start | phase | examples | gathering CPU min | fine-tuning CPU min | steps "
        "| loss | learner's success while gathering |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, phases in results["training"].items():
        for phase in phases:
            rate = phase.get("dagger_success_rate")
            loss = phase.get("train_loss")
            lines.append(
                f"| {name} | {phase['phase']} | {phase['examples'] or ''} "
                f"| {phase['gather_cpu_minutes']:.1f} | {phase['train_cpu_minutes']:.1f} "
                f"| {phase['train_steps'] or ''} | {'' if loss is None else f'{loss:.3f}'} "
                f"| {'' if rate is None else f'{rate:.2f}'} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="results JSON (written after each setting)")
    parser.add_argument("--workspace", default=None, help="bank + runs (default: <out>.workspace)")
    parser.add_argument("--goals", type=int, default=50, help="fixed test goals 0..N-1")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--model", default="embedded", help="base model")
    parser.add_argument("--max-turns", type=int, default=15)
    parser.add_argument("--max-prompt-tokens", type=int, default=512, help="training budget")
    parser.add_argument("--sft-goals", type=int, default=64, help="behaviour-cloning goals")
    parser.add_argument("--dagger-rounds", type=int, default=2)
    parser.add_argument("--dagger-goals", type=int, default=32)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    Bench(args).run()


if __name__ == "__main__":
    main()
