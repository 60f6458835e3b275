"""CycleConfig: which goals evolve the bank (never the test goals), which cycles evaluate."""

from __future__ import annotations

import pytest

from skillrl_core.errors import ConfigError
from skillrl_core.splits import TEST_SPLIT
from trainers.cycle.config import CycleConfig


def test_validation_goals_evolve_the_bank_when_there_are_any():
    config = CycleConfig(validation_goals=3, validation_split="eval", eval_split=TEST_SPLIT)
    assert config.evolve_goals == ("validation", "eval", 3, 0)


def test_without_validation_goals_test_goals_never_evolve_it():
    assert CycleConfig(validation_goals=0, eval_split=TEST_SPLIT).evolve_goals is None


def test_without_validation_goals_non_test_evaluation_goals_do():
    config = CycleConfig(validation_goals=0, eval_split="eval", eval_goals=7)
    assert config.evolve_goals == ("eval", "eval", 7, 0)


def test_eval_every_evaluates_the_start_every_nth_cycle_and_the_last():
    config = CycleConfig(cycles=7, eval_every=3)
    assert [c for c in range(8) if config.evaluates(c)] == [0, 3, 6, 7]
    assert all(CycleConfig(cycles=4).evaluates(c) for c in range(5))


def test_eval_every_below_one_names_the_field():
    with pytest.raises(ConfigError, match=r"eval_every \(0\)"):
        CycleConfig(eval_every=0)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"rft_weight": 0.5}, "rft_weight \\(0.5\\) mixes RFT into estimator 'grpo'"),
        ({"step_weight": 3.0}, "step_weight \\(3.0\\) is not used by estimator 'rft'"),
        ({"step_weight": 0.0}, "step_weight \\(0.0\\) is not used by estimator 'rft'"),
    ],
)
def test_a_weight_the_rft_estimator_ignores_is_refused(weights, message):
    from trainers.update.config import GRPOConfig

    with pytest.raises(ConfigError, match=message):
        GRPOConfig(estimator="rft", **weights)
    GRPOConfig(estimator="grpo", **weights)  # grpo reads both weights
    rft = GRPOConfig(estimator="rft").advantage_estimator()
    assert rft.name == "rft" and not hasattr(rft, "step_weight")  # no step part to weigh
    grpo = GRPOConfig(step_weight=0.5, rft_weight=2.0, gamma=0.9).advantage_estimator()
    assert (grpo.name, grpo.step_weight, grpo.rft_weight, grpo.gamma) == ("grpo", 0.5, 2.0, 0.9)


def test_train_refuses_an_ignored_estimator_weight_before_anything_loads(tmp_path):
    from click.testing import CliRunner

    from cli import main

    ws = tmp_path / "ws"
    for extra in (["--rft-weight", "0.5"], ["--step-weight", "3"]):
        result = CliRunner().invoke(
            main, ["train", "--workspace", str(ws), "--estimator", "rft", *extra]
        )
        assert result.exit_code == 1 and "estimator 'rft'" in result.output, result.output
    assert not ws.exists()
