"""A run chooses its best cycle on evaluation goals that are not test goals, and leaves it."""

from __future__ import annotations

import json

import pytest
import torch
from fake_policy import ScriptedPolicy
from safetensors.torch import load_file
from test_cycle_resume import EMBEDDER, GRPO

from memory import BankConfig, SkillBank
from skillrl.distill import AnalyticDistiller, seed_bank_if_empty
from skillrl.policies.model_settings import ModelSettings
from skillrl_core.errors import CheckpointError, ConfigError
from skillrl_core.records import EpisodeRecord
from trainers.common.checkpoint import PARAMS_FILE
from trainers.common.episode_metrics import EpisodeSummary
from trainers.common.policy_rollouts import PolicyRollouts
from trainers.cycle.checkpoint_choice import (
    EvaluatedCycle,
    PairedTest,
    RunChoice,
    choose_cycle,
    evaluations_since_best,
)
from trainers.cycle.config import CycleConfig
from trainers.cycle.cycle import TrainingRun
from trainers.cycle.run_files import RunFiles


def row(cycle: int, successes: int | None, episodes: int = 10, score: float = 0.5) -> dict:
    if successes is None:
        return {"cycle": cycle}
    return {
        "cycle": cycle,
        "eval.episodes": episodes,
        "eval.success_rate": successes / episodes,
        "eval.mean_score": score,
        "eval.mean_turns": 4.0,
        "eval.invalid_action_rate": 0.0,
        "eval.tokens_per_episode": 100.0,
        "eval.completion_tokens_per_episode": 10.0,
    }


def test_the_most_successes_win_then_the_score_then_the_earlier_cycle():
    assert choose_cycle([]) is None
    assert choose_cycle([row(0, 3), row(1, None), row(2, 5), row(3, 4)]).cycle == 2
    assert choose_cycle([row(0, 5, score=0.4), row(2, 5, score=0.6)]).cycle == 2
    assert choose_cycle([row(0, 5), row(2, 5), row(4, 5)]).cycle == 0


def test_evaluations_since_the_best_count_only_evaluated_cycles():
    history = [row(0, 3), row(1, 6), row(2, None), row(3, 5), row(4, 6)]
    assert evaluations_since_best(history) == 2  # cycles 3 and 4; 4 ties 1 and loses the tie
    assert evaluations_since_best([row(0, 1), row(1, 2)]) == 0


def outcome(success: bool, score: float) -> EpisodeRecord:
    return EpisodeRecord(
        env_id="webshop", goal_id="g", instruction="i", category="c", turns=[],
        success=success, score=score,
    )  # fmt: skip


def test_the_paired_test_counts_the_goals_each_side_won_alone():
    start = [outcome(s, float(s)) for s in (True, True, False, False, False)]
    chosen = [outcome(s, float(s)) for s in (True, False, True, True, False)]
    test = PairedTest.of(start, chosen)
    assert (test.goals, test.start_successes, test.chosen_successes) == (5, 2, 3)
    assert (test.won, test.lost) == (2, 1)
    assert test.p_value == 1.0
    with pytest.raises(ValueError):
        PairedTest.of(start, chosen[:4])


def test_best_json_reads_back_and_a_damaged_one_is_named(tmp_path):
    files = RunFiles(tmp_path)
    assert files.load_choice() is None
    choice = RunChoice(3, "checkpoints/cycle-0003", EvaluatedCycle(3, 60, 100, 0.7), "eval", 4)
    files.save_choice(choice)
    assert files.load_choice() == choice
    files.choice_path.write_text(json.dumps({**choice.to_dict(), "cycle": "three"}))
    with pytest.raises(CheckpointError, match="best.json"):
        files.load_choice()


def test_patience_and_test_goals_need_evaluation_goals_that_are_not_test_goals():
    for given in ({"test_goals": 5}, {"patience": 2}):
        with pytest.raises(ConfigError, match="--eval-split eval"):
            CycleConfig(**given)
        with pytest.raises(ConfigError, match="eval_goals 0"):
            CycleConfig(eval_split="eval", eval_goals=0, **given)
    assert CycleConfig(eval_split="eval", eval_goals=5, test_goals=3, patience=1).chooses_checkpoint
    assert not CycleConfig().chooses_checkpoint


def test_validation_goals_start_past_the_evaluation_goals_of_the_same_split():
    config = CycleConfig(eval_split="eval", eval_goals=10, validation_goals=4)
    assert config.evolve_goals == ("validation", "eval", 4, 10)
    assert CycleConfig(validation_goals=4).evolve_goals.first == 0  # test goals: no overlap


class ScriptedEvaluation(TrainingRun):
    """Evaluation success counts set per cycle (the scripted policy plays alike every cycle)."""

    successes = {0: 1, 1: 2, 2: 1, 3: 0, 4: 2}

    def _eval(self, cycle, state):
        super()._eval(cycle, state)
        n = self.successes[cycle]
        self._measured(state, cycle, eval=EpisodeSummary(2, n / 2, n / 2, 3.0, 0.0, 9.0, 3.0))


def open_scripted_run(workspace, config, **run_options):
    bank = SkillBank.open(BankConfig(workspace=workspace), embedder=EMBEDDER)
    seed_bank_if_empty(bank, "webshop")
    runner = PolicyRollouts(
        ScriptedPolicy(),
        bank=bank,
        max_turns=config.max_turns,
        max_new_tokens=config.max_new_tokens,
    )
    run = ScriptedEvaluation(
        config,
        GRPO,
        policy=runner.policy,
        runner=runner,
        run_dir=workspace / "runs" / "r",
        bank=bank,
        distiller=AnalyticDistiller(),
        **run_options,
    )
    return run, bank


@pytest.mark.slow
def test_a_run_stops_on_patience_leaves_its_best_cycle_and_pairs_it_on_test_goals(tmp_path):
    config = CycleConfig(
        cycles=4,
        goals_per_cycle=1,
        group_size=2,
        eval_goals=2,
        eval_split="eval",
        validation_goals=1,
        test_goals=2,
        patience=2,
        max_turns=3,
        max_new_tokens=16,
        seed=5,
        max_topup_rounds=0,
        dynamic_sampling=False,
    )
    run, bank = open_scripted_run(tmp_path, config)
    splits: list[str] = []  # the split of every episode the run starts, in order
    start = run.eval_runner.start

    def recording(split, index, **kwargs):
        splits.append(split)
        return start(split, index, **kwargs)

    run.eval_runner.start = run.runner.start = recording
    from trainers.common.phased_run import HeldOutPlayStarted

    announced = []  # (event, episodes started before it): the progress line's cue
    run.events.on(HeldOutPlayStarted, lambda event: announced.append((event, len(splits))))
    state = run.run()
    bank.close()
    files = run.files
    # No test goal is played between cycle 0's evaluation and the chosen cycle's test play.
    assert splits[:4] == ["eval", "eval", "test", "test"] and splits[-2:] == ["test", "test"]
    # The test play is announced once, before its episodes, naming the chosen cycle.
    chosen_cycle = files.load_choice().cycle
    assert announced == [(HeldOutPlayStarted(chosen_cycle, 2), len(splits) - 2)]
    assert "test" not in splits[4:-2] and splits.count("train") > 0
    # Cycle 1 is best (2 of 2); cycles 2 and 3 fall behind it: the run stops after cycle 3.
    assert state.done and state.stopped_early_after == 3 and state.tested
    assert [r["cycle"] for r in state.history] == [0, 1, 2, 3]
    choice = files.load_choice()
    assert (choice.cycle, choice.checkpoint, choice.stopped_early_after) == (
        1,
        "checkpoints/cycle-0001",
        3,
    )
    # Test goals were played at cycle 0 and by the chosen cycle, at no other time.
    played = sorted(p.parent.name for p in files.root.glob("cycles/*/test.json"))
    assert played == ["0000", "0001"]
    start = json.loads((files.cycle_dir(0) / "test.json").read_text())["episodes"]
    assert choice.test.goals == 2
    assert choice.test.start_successes == sum(bool(e["success"]) for e in start)
    # The validation goals came after the evaluation goals: eval-split goals 2 on.
    validation = json.loads((files.cycle_dir(1) / "validation.json").read_text())["episodes"]
    evaluation = json.loads((files.cycle_dir(1) / "eval.json").read_text())["episodes"]
    assert not {e["goal_id"] for e in validation} & {e["goal_id"] for e in evaluation}
    # The model holds cycle 1's weights, not the last update's.
    best = load_file(str(files.best_weights))
    last = load_file(str(files.trainer_state / PARAMS_FILE))
    params = dict(run.trainer.unwrapped_model.named_parameters())
    assert any(not torch.equal(best[n], last[n]) for n in best)
    assert all(torch.equal(params[n].detach().cpu(), best[n]) for n in best)
    # The chosen checkpoint records its test figures, as `--model auto` reads them.
    figures = ModelSettings.load(files.checkpoint(1)).figures
    assert (figures["test_goals"], figures["test_successes"]) == (2, choice.test.chosen_successes)


class StartIsBest(ScriptedEvaluation):
    successes = {0: 2, 1: 1, 2: 1}


@pytest.mark.slow
def test_a_run_that_keeps_its_start_plays_no_test_goal_again_and_announces_none(tmp_path):
    from trainers.common.phased_run import HeldOutPlayStarted

    config = CycleConfig(cycles=2, goals_per_cycle=1, group_size=2, eval_goals=2,
                         eval_split="eval", validation_goals=0, test_goals=2, max_turns=3,
                         max_new_tokens=16, seed=5, max_topup_rounds=0,
                         dynamic_sampling=False)  # fmt: skip
    bank = SkillBank.open(BankConfig(workspace=tmp_path), embedder=EMBEDDER)
    seed_bank_if_empty(bank, "webshop")
    runner = PolicyRollouts(ScriptedPolicy(), bank=bank, max_turns=3, max_new_tokens=16)
    run = StartIsBest(config, GRPO, policy=runner.policy, runner=runner,
                      run_dir=tmp_path / "runs" / "r", bank=bank,
                      distiller=AnalyticDistiller())  # fmt: skip
    splits: list[str] = []
    start = run.eval_runner.start

    def recording(split, index, **kwargs):
        splits.append(split)
        return start(split, index, **kwargs)

    run.eval_runner.start = run.runner.start = recording
    announced = []
    run.events.on(HeldOutPlayStarted, announced.append)
    state = run.run()
    bank.close()
    choice = run.files.load_choice()
    assert state.tested and choice.cycle == 0
    # Cycle 0's test episodes are read back, not played again, and no play is announced.
    assert splits.count("test") == 2 and announced == []
    assert (choice.test.won, choice.test.lost) == (0, 0)


class Interrupted(Exception):
    pass


@pytest.mark.slow
def test_a_resumed_run_keeps_its_choice_and_leaves_the_chosen_weights(tmp_path):
    from trainers.common.phased_run import PhaseEnded, RunEvents
    from trainers.cycle.run_files import CyclePhase

    config = CycleConfig(cycles=2, goals_per_cycle=1, group_size=2, eval_goals=2,
                         eval_split="eval", validation_goals=0, max_turns=3, max_new_tokens=16,
                         seed=4, max_topup_rounds=0, dynamic_sampling=False)  # fmt: skip
    events = RunEvents()

    def kill(event):
        if event == PhaseEnded(2, CyclePhase.UPDATE):
            raise Interrupted

    events.on(PhaseEnded, kill)
    run, bank = open_scripted_run(tmp_path, config, events=events)
    with pytest.raises(Interrupted):
        run.run()
    bank.close()
    chosen = run.files.load_choice()
    kept = run.files.best_weights.read_bytes()
    assert chosen.cycle == 1  # 2 of 2 at cycle 1, against 1 of 2 at cycle 0
    resumed, bank = open_scripted_run(tmp_path, config)
    state = resumed.run(resume=True)
    bank.close()
    assert state.done and [r["cycle"] for r in state.history] == [0, 1, 2]
    assert resumed.files.load_choice() == chosen  # cycle 2 (1 of 2) did not beat it
    assert resumed.files.best_weights.read_bytes() == kept
    best = load_file(str(resumed.files.best_weights))
    params = dict(resumed.trainer.unwrapped_model.named_parameters())
    assert all(torch.equal(params[n].detach().cpu(), best[n]) for n in best)
