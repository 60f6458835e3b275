"""One short training run with a bank, in this process or as one of a launcher's processes.

``python scale_out_run.py WORKSPACE OUT_DIR PER_DEVICE_BATCH`` (alone, or under
``torchrun --nproc_per_node 2``): cycle 0 and two improvement cycles of the resume tests' small
run (scripted policy over a tiny random Llama, hashed-words embedder, analytic distiller). The
main process writes ``OUT_DIR/bank.json`` (the bank's contents and stored episodes),
``OUT_DIR/weights.safetensors`` (the trained model) and ``OUT_DIR/history.json``; every process
writes ``OUT_DIR/process-<index>.json`` (its index, count and the samples it trained on).

Then one GRPO ``train_step`` on three turns, whose second optimizer step (of two turns per
step) holds one turn: under two processes the second process's share of it is empty, the case
where it joins the gradient averaging with a zero gradient. The main process writes those
weights to ``OUT_DIR/step.safetensors``.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

from fake_policy import ScriptedPolicy, ids_of, tiny_causal_lm
from safetensors.torch import save_file
from test_cycle_resume import EMBEDDER, counts
from trainer_helpers import group_episodes

from memory import BankConfig, SkillBank
from skillrl.distill import AnalyticDistiller, seed_bank_if_empty
from skillrl.policies.base import Generation
from trainers.common.policy_rollouts import PolicyRollouts
from trainers.cycle.config import CycleConfig
from trainers.cycle.cycle import TrainingRun
from trainers.cycle.processes import Processes
from trainers.update.config import GRPOConfig
from trainers.update.grpo import GRPOTrainer

CONFIG = CycleConfig(
    cycles=2,  # cycle 2 retrieves what cycle 1 distilled: the others must see the new entries
    goals_per_cycle=3,  # odd: the two processes play different numbers of groups
    group_size=2,
    eval_goals=2,
    max_turns=3,
    max_new_tokens=24,
    seed=5,
    max_topup_rounds=1,
)


class GroupScriptedPolicy(ScriptedPolicy):
    """The scripted agent, but the members of a group choose differently from one another.

    Identical prompts in one call (the members of a group at the same point) take consecutive
    options: the k-th copy takes option (hash + k); even copies buy when they can, so some
    episodes score and their groups have signal. The sampling seed is ignored, so an
    episode's actions do not depend on which process played it or what shared its batch: the
    one- and two-process runs play the same episodes, and their groups have signal.
    """

    def generate(self, conversations, sampling):
        self.calls += 1
        seen: collections.Counter[str] = collections.Counter()
        out = []
        for conversation in conversations:
            prompt = "\n".join(m["content"] for m in conversation)
            copy = seen[prompt]
            seen[prompt] += 1
            out.append(self._copy(prompt, copy))
        return out

    def _copy(self, prompt: str, copy: int) -> Generation:
        import hashlib
        import re

        digest = hashlib.sha256(prompt.encode()).digest()
        listed = re.search(r"^Actions: (.*)$", prompt, re.MULTILINE)
        listed_text = listed.group(1) if listed else ""
        if "search[" in listed_text and "click[" not in listed_text:
            task = re.search(r"Task: (.*)", prompt)
            words = (task.group(1) if task else "product").split()[: 3 + copy]
            action = f"search[{' '.join(words)}]"
        else:
            options = re.findall(r"click\[[^\]]*\]", listed_text) or ["click[back to search]"]
            buys = "click[buy now]" in options and copy % 2 == 0  # a bought item scores
            action = "click[buy now]" if buys else options[(digest[1] + copy) % len(options)]
        text = f"<think>go</think><action>{action}</action>"
        completion = ids_of(text, 24)
        return Generation(
            text=text,
            prompt_token_ids=ids_of(prompt, 200),
            completion_token_ids=completion,
            logprobs=[-2.0 - (digest[2] % 7) / 10] * len(completion),
        )


def main(workspace: Path, out: Path, batch: int) -> None:
    processes = Processes.current()
    grpo = GRPOConfig(
        learning_rate=1e-2, per_device_train_batch_size=batch, gradient_accumulation_steps=2
    )
    with processes.main_first():  # the main process creates and seeds the bank
        bank = SkillBank.open(BankConfig(workspace=workspace), embedder=EMBEDDER)
        if processes.is_main:
            seed_bank_if_empty(bank, "webshop")
    policy = GroupScriptedPolicy()
    runner = PolicyRollouts(
        policy,
        bank=bank,
        max_turns=CONFIG.max_turns,
        max_new_tokens=CONFIG.max_new_tokens,
    )
    run = TrainingRun(
        CONFIG,
        grpo,
        policy=policy,
        runner=runner,
        run_dir=workspace / "runs" / "r",
        bank=bank,
        distiller=AnalyticDistiller(),
        processes=processes,
    )
    trained: list[int] = []
    train_step = run.trainer.train_step

    def counting_step(episodes, advantages):
        step = train_step(episodes, advantages)
        trained.append(step.samples)
        return step

    run.trainer.train_step = counting_step
    state = run.run()
    out.mkdir(parents=True, exist_ok=True)
    own = {"index": processes.index, "count": processes.count, "samples": trained}
    (out / f"process-{processes.index}.json").write_text(json.dumps(own))
    if processes.is_main:
        episodes = sorted(
            (e.group_id or "", e.goal_id, [t.action for t in e.turns], e.score)
            for e in bank.trajectories.episodes()
        )
        (out / "bank.json").write_text(json.dumps({**counts(bank), "stored": episodes}))
        weights = {
            k: v.detach().clone() for k, v in run.trainer.unwrapped_model.state_dict().items()
        }
        save_file(weights, str(out / "weights.safetensors"))
        (out / "history.json").write_text(json.dumps(state.history))
    bank.close()
    uneven_step(out, processes, batch // 2)


def uneven_step(out: Path, processes: Processes, batch: int) -> None:
    """Train three turns in steps of two (``batch`` per process): the last step has one."""
    model = tiny_causal_lm(seed=1)
    grpo = GRPOConfig(
        learning_rate=1e-2, per_device_train_batch_size=batch, gradient_accumulation_steps=1
    )
    trainer = GRPOTrainer(model, grpo, pad_token_id=0, seed=2)
    prompt, good, bad = [5, 6, 7, 8], [9, 10, 11], [12, 13]
    episodes = group_episodes(model, prompt, good, bad) + group_episodes(model, prompt, bad, good)
    step = trainer.train_step(episodes[:3], [[1.0], [-1.0], [0.5]])
    if processes.is_main:
        assert step.optimizer_steps == 2, step
        weights = {k: v.detach().clone() for k, v in trainer.unwrapped_model.state_dict().items()}
        save_file(weights, str(out / "step.safetensors"))
        (out / "step.json").write_text(json.dumps({"grad_norm": step.grad_norm}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
