from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch
from fake_policy import ScriptedPolicy
from transformers import AutoModelForCausalLM

from memory import BankConfig, SkillBank
from skillrl.distill import AnalyticDistiller, seed_bank_if_empty
from skillrl_core.errors import CheckpointError
from trainers.common.phased_run import PhaseEnded, PhaseSaved, PhaseStarted, RunEvents
from trainers.common.policy_rollouts import PolicyRollouts
from trainers.cycle.config import CycleConfig
from trainers.cycle.cycle import TrainingRun
from trainers.cycle.run_files import CyclePhase
from trainers.cycle.run_settings import run_settings
from trainers.update.config import GRPOConfig

CONFIG = CycleConfig(
    cycles=2,
    goals_per_cycle=2,
    group_size=2,
    eval_goals=2,
    max_turns=4,
    max_new_tokens=24,
    seed=3,
    max_topup_rounds=1,
)
GRPO = GRPOConfig(learning_rate=1e-3, per_device_train_batch_size=8, gradient_accumulation_steps=1)


class Interrupted(Exception):
    pass


class HashedWords:
    """A fast deterministic bag-of-words embedder: resumability does not depend on embedding
    quality, and MiniLM on every turn's observation would make this test take minutes."""

    name = "hashed-words"
    dim = 64

    def embed(self, texts):
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                rows[i, int.from_bytes(digest, "little") % self.dim] += 1.0
            rows[i] /= max(np.linalg.norm(rows[i]), 1e-6)
        return rows


EMBEDDER = HashedWords()


def open_run(workspace, config=CONFIG, stop_at=None, options=None):
    bank = SkillBank.open(BankConfig(workspace=workspace), embedder=EMBEDDER)
    seed_bank_if_empty(bank, "webshop")
    policy = ScriptedPolicy()
    runner = PolicyRollouts(
        policy,
        bank=bank,
        max_turns=config.max_turns,
        max_new_tokens=config.max_new_tokens,
    )

    events = RunEvents()
    if stop_at is not None:

        def stop(event):
            if event == stop_at:
                raise Interrupted(f"killed at {event}")

        events.on(type(stop_at), stop)

    run = TrainingRun(
        config,
        GRPO,
        policy=policy,
        runner=runner,
        run_dir=workspace / "runs" / "r",
        bank=bank,
        distiller=AnalyticDistiller(),
        events=events,
        options=options,
    )
    return run, bank


def counts(bank):
    episodes = bank.trajectories.episodes()
    ids = [e.episode_id for e in episodes]
    assert len(ids) == len(set(ids))
    everything = bank.list(status=None)
    what = {e.id: (e.kind, e.category or "", e.title) for e in everything}
    return {
        "entries": bank.count(status=None),
        "active": bank.count(),
        "episodes": len(episodes),
        "snapshots": len(bank.snapshots.list()),
        # The same entries, not just as many: content, status, merges and usage counters.
        "content": sorted(
            (
                e.kind,
                e.category or "",
                e.title,
                e.principle,
                e.status,
                e.support_count,
                e.times_retrieved,
            )
            for e in everything
        ),
        # Every turn was served the same entries (ids differ between runs: their content).
        "served": sorted(
            (
                e.group_id or "",
                e.goal_id,
                e.split,
                [[what[i] for i in t.retrieved_ids] for t in e.turns],
            )
            for e in episodes
        ),
    }


@pytest.mark.slow
def test_interrupted_run_resumes_to_the_same_bank_and_trajectory_counts(tmp_path):
    straight_ws = tmp_path / "straight"
    run, bank = open_run(straight_ws)
    state = run.run()
    expected = counts(bank)
    bank.close()
    assert state.done and [row["cycle"] for row in state.history] == [0, 1, 2]
    assert expected["episodes"] == 2 * 2 * 2 + run_topups(state)
    assert expected["snapshots"] == 3

    ws = tmp_path / "killed"
    # Killed after a committed phase, in the middle of a rollout (episodes written, not yet
    # stored), and after an update was applied and saved but not committed.
    stops = [
        PhaseEnded(1, CyclePhase.DISTILL),
        PhaseSaved(2, CyclePhase.ROLLOUT),
        PhaseSaved(2, CyclePhase.UPDATE),
        PhaseStarted(2, CyclePhase.SAVE),
    ]
    resume = False
    for stop in stops:
        run, bank = open_run(ws, stop_at=stop)
        with pytest.raises(Interrupted):
            run.run(resume=resume)
        bank.close()
        resume = True
    run, bank = open_run(ws)
    state = run.run(resume=True)
    assert counts(bank) == expected
    bank.close()
    rows = [json.loads(line) for line in (ws / "runs/r/metrics.jsonl").read_text().splitlines()]
    assert [row["cycle"] for row in rows] == [0, 1, 2]
    assert rows[2]["update.optimizer_steps"] == state.history[2]["update.optimizer_steps"]
    assert (ws / "runs/r/learning_curve.png").stat().st_size > 1000
    model = AutoModelForCausalLM.from_pretrained(ws / "runs/r/checkpoints/cycle-0002")
    assert model.config.vocab_size == 97
    # The same weights as the unbroken run: every update cut its samples in the same order.
    straight = AutoModelForCausalLM.from_pretrained(straight_ws / "runs/r/checkpoints/cycle-0002")
    weights = dict(straight.named_parameters())
    assert all(torch.equal(weights[n], p) for n, p in model.named_parameters())


def run_topups(state):
    """Episodes rolled out beyond the wanted groups (dynamic sampling top-ups)."""
    return sum(row["train.episodes"] - 4 for row in state.history if "train.episodes" in row)


@pytest.mark.slow
def test_resume_refuses_changed_settings_and_a_fresh_start_refuses_an_existing_run(tmp_path):
    small = CycleConfig(
        cycles=1,
        goals_per_cycle=1,
        group_size=2,
        eval_goals=1,
        max_turns=2,
        max_new_tokens=24,
        distill=False,
        evolve=False,
    )
    run, bank = open_run(tmp_path, config=small, stop_at=PhaseEnded(1, CyclePhase.ROLLOUT))
    with pytest.raises(Interrupted):
        run.run()
    bank.close()
    run, bank = open_run(tmp_path, config=small)
    with pytest.raises(CheckpointError, match="already holds a run"):
        run.run()
    bank.close()
    changed = CycleConfig(**{**small.__dict__, "group_size": 3})
    run, bank = open_run(tmp_path, config=changed)
    with pytest.raises(CheckpointError, match="different settings"):
        run.run(resume=True)
    bank.close()


def test_a_run_saves_its_launch_options_once_with_its_configs(tmp_path):
    small = CycleConfig(cycles=1, goals_per_cycle=1, group_size=2, eval_goals=1, max_turns=2)
    run, bank = open_run(
        tmp_path, small, stop_at=PhaseEnded(1, CyclePhase.ROLLOUT), options={"cycles": 1}
    )
    with pytest.raises(Interrupted):
        run.run()
    bank.close()
    folder = tmp_path / "runs" / "r"
    saved = json.loads((folder / "config.json").read_text())
    assert saved == run_settings(small, GRPO, {"cycles": 1})
    assert sorted(p.name for p in folder.glob("*.json")) == ["config.json", "state.json"]

    # A library caller resuming without options keeps the saved ones; new ones replace them.
    longer = CycleConfig(**{**small.__dict__, "cycles": 2})
    run, bank = open_run(tmp_path, longer, stop_at=PhaseEnded(2, CyclePhase.ROLLOUT))
    with pytest.raises(Interrupted):
        run.run(resume=True)
    bank.close()
    saved = json.loads((folder / "config.json").read_text())
    assert saved["options"] == {"cycles": 1} and saved["cycle"]["cycles"] == 2
    run, bank = open_run(tmp_path, longer, options={"cycles": 2})
    assert run.run(resume=True).done
    bank.close()
    assert json.loads((folder / "config.json").read_text())["options"] == {"cycles": 2}


def test_evaluation_leaves_the_bank_usage_counters_alone(tmp_path):
    run, bank = open_run(tmp_path, stop_at=PhaseEnded(0, CyclePhase.SAVE))
    with pytest.raises(Interrupted):
        run.run()  # cycle 0 is the evaluation of the starting point
    evaluated = [e for e in run.files.load_episodes(0, "eval")["episodes"] if e.turns]
    assert any(t.retrieved_ids for e in evaluated for t in e.turns)
    assert all(e.times_retrieved == 0 for e in bank.list(status=None))
    bank.close()


def retrieval_events(bank):
    from sqlalchemy import func, select

    from memory.models import RetrievalEventRow

    with bank.store.engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(RetrievalEventRow)).scalar()


def leftovers(root):
    """Temp files and folders of atomic writes (``.<name>.<random>.tmp``, ``.<name>.old``)."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob(".*")
        if p.name.endswith((".tmp", ".old", ".tmp.png"))
    )


def sigkill_run(workspace, where, resume):
    """Run ``killed_run.py`` in a child process that SIGKILLs itself at ``where``."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parents[1]), str(here)])}
    args = [sys.executable, str(here / "killed_run.py"), str(workspace), where]
    done = subprocess.run(
        [*args, *(["--resume"] if resume else [])], env=env, capture_output=True, timeout=600
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]


@pytest.mark.slow
def test_runs_killed_in_a_rollout_and_in_a_save_resume_without_double_counts_or_leftovers(
    tmp_path,
):
    straight_ws = tmp_path / "straight"
    run, bank = open_run(straight_ws)
    run.run()
    expected, expected_events = counts(bank), retrieval_events(bank)
    bank.close()
    assert expected_events > 0
    expected_files = sorted(p.name for p in (straight_ws / "runs/r/checkpoints").iterdir())

    ws = tmp_path / "killed"
    sigkill_run(ws, "rollout", resume=False)
    assert (ws / "runs/r/cycles/0000/eval.json").exists()
    assert not (ws / "runs/r/cycles/0001/rollout.json").exists()  # died inside the rollout
    sigkill_run(ws, "save", resume=True)
    checkpoints = ws / "runs/r/checkpoints"
    assert [p for p in leftovers(checkpoints) if p.startswith(".cycle-0001.")]  # died mid-save
    run, bank = open_run(ws)
    run.run(resume=True)
    assert retrieval_events(bank) == expected_events
    assert counts(bank) == expected
    bank.close()
    assert leftovers(ws / "runs/r") == []
    assert sorted(p.name for p in checkpoints.iterdir()) == expected_files


def test_a_new_checkpoint_save_removes_what_a_killed_save_left(tmp_path):
    from fake_policy import TinyTokenizer, tiny_causal_lm

    from trainers.common.checkpoint import save_checkpoint

    target = tmp_path / "checkpoints" / "cycle-0001"
    stale = tmp_path / "checkpoints" / ".cycle-0001.x1y2.tmp"
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"\0" * 1024)
    other = tmp_path / "checkpoints" / ".cycle-0002.x1y2.tmp"  # another target's: kept
    other.mkdir()
    save_checkpoint(tiny_causal_lm(), TinyTokenizer(), target)
    assert (target / "config.json").exists()
    assert not stale.exists() and other.exists()


@pytest.mark.parametrize("validation_goals", [0, 2])
def test_the_bank_never_evolves_from_test_goals(tmp_path, monkeypatch, validation_goals):
    """Without validation goals the test goals' failures would be learned and then re-measured."""
    import skillrl.distill

    seen = []

    def record(bank, distiller, episodes):
        seen.append({e.split for e in episodes})
        return real(bank, distiller, episodes)

    real = skillrl.distill.evolve_from_validation
    monkeypatch.setattr(skillrl.distill, "evolve_from_validation", record)
    config = CycleConfig(**{**CONFIG.__dict__, "cycles": 1, "validation_goals": validation_goals})
    run, bank = open_run(tmp_path, config=config, stop_at=PhaseEnded(1, CyclePhase.SAVE))
    with pytest.raises(Interrupted):
        run.run()
    bank.close()
    assert config.eval_split == "test"
    assert seen == ([] if validation_goals == 0 else [{"eval"}])
    if validation_goals == 0:
        assert run.files.load_state().history[-1]["bank.evolved_entries"] == 0


def test_a_cycle_runs_its_phases_in_the_order_state_json_records():
    from trainers.cycle.run_files import cycle_phases

    config = CycleConfig(cycles=3, eval_every=2)
    every = list(CyclePhase)
    assert [p.value for p in every] == ["rollout", "distill", "update", "eval", "evolve", "save"]
    assert list(cycle_phases(config, 2)) == every
    assert list(cycle_phases(config, 0)) == [CyclePhase.EVAL, CyclePhase.SAVE]
    assert list(cycle_phases(config, 1)) == [p for p in every if p is not CyclePhase.EVAL]
    assert list(cycle_phases(config, 3)) == every  # the last is always evaluated


@pytest.mark.slow
def test_eval_every_evaluates_cycle_0_every_nth_and_the_last_and_a_resume_counts_them(tmp_path):
    from skillrl_cli.train_session import phases_done, phases_total

    config = CycleConfig(**{**CONFIG.__dict__, "cycles": 3, "eval_every": 2})
    run, bank = open_run(tmp_path, config, stop_at=PhaseStarted(3, CyclePhase.ROLLOUT))
    with pytest.raises(Interrupted):
        run.run()
    bank.close()
    state = run.files.load_state()
    evaluated = {row["cycle"]: "eval.success_rate" in row for row in state.history}
    assert evaluated == {0: True, 1: False, 2: True}
    assert "train.success_rate" in state.history[1]
    assert run.files.load_episodes(1, "eval") is None
    assert run.files.load_episodes(2, "eval") is not None
    # cycle 0: eval, save; cycle 1: five phases; cycle 2: six; cycle 3: six
    assert phases_total(config) == 2 + 5 + 6 + 6
    assert phases_done(state, config) == 2 + 5 + 6
    run, bank = open_run(tmp_path, config)
    state = run.run(resume=True)
    bank.close()
    assert [row["cycle"] for row in state.history if "eval.success_rate" in row] == [0, 2, 3]


def test_a_cycle_writes_down_the_advantages_its_update_trained_on(tmp_path):
    from trainers.cycle.rewards import compute_turn_rewards, default_reward_functions
    from trainers.cycle.run_files import RunFiles
    from trainers.update.advantages import compute_advantages

    # The scripted policy plays a goal the same way every time: keep its no-signal groups.
    every_group = CycleConfig(**{**CONFIG.__dict__, "dynamic_sampling": False})
    run, bank = open_run(tmp_path, every_group)
    assert run.run().done
    bank.close()
    files = RunFiles(tmp_path / "runs" / "r")
    assert (files.root / "tensorboard").is_dir()  # the default tracker
    trained = 0
    for cycle in (1, 2):
        phase, record = files.load_rollout(cycle), files.load_update_record(cycle)
        assert record is not None and record.step_weight == GRPO.step_weight
        kept = phase.kept_episodes()
        assert [e.episode_id for e in record.episodes] == [e.episode_id for e in kept]
        assert {e.group for e in record.episodes} == set(phase.kept_groups)
        trained += len(kept)
        if not kept:
            continue
        rewards = compute_turn_rewards(kept, default_reward_functions(0.1, 0.01))
        expected = compute_advantages(
            kept, rewards, gamma=GRPO.gamma, step_weight=GRPO.step_weight, scale=GRPO.scale_rewards
        )
        for saved, a_episode, a_turns in zip(
            record.episodes, expected.episode, expected.advantages, strict=True
        ):
            assert saved.episode_advantage == pytest.approx(a_episode)
            assert [t.advantage for t in saved.turns] == pytest.approx(a_turns)
            for turn in saved.turns:
                combined = saved.episode_advantage + record.step_weight * turn.step_advantage
                assert turn.advantage == pytest.approx(combined)  # GiGPO Eq. 8
                assert turn.left_out in ("", "zero advantage: no policy gradient")
    assert trained > 0


@pytest.mark.slow
def test_an_evaluated_cycle_records_how_much_its_choices_depend_on_the_entries(tmp_path):
    import dataclasses

    for probed in (True, False):
        config = dataclasses.replace(CONFIG, sensitivity=probed)
        workspace = tmp_path / str(probed)
        run, bank = open_run(workspace, config=config, stop_at=PhaseEnded(0, CyclePhase.SAVE))
        with pytest.raises(Interrupted):
            run.run()
        played = run.files.load_episodes(0, "eval")
        if probed:
            figures = played["sensitivity"]
            assert set(figures) == {"turns", "changed_share", "mean_kl"}
            assert 0.0 <= figures["changed_share"] <= 1.0 and figures["mean_kl"] >= 0.0
        else:
            assert "sensitivity" not in played
        assert all(e.times_retrieved == 0 for e in bank.list(status=None))
        bank.close()
