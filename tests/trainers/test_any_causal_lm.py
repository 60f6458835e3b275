"""Any local causal LM as the policy: a folder of another architecture plays, scores and trains.

Tiny random Qwen2 and GPT-2 checkpoints with their own chat template (not SmolLM2's ChatML),
built here and saved to a temp folder: no hub.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from tiny_checkpoint import write_tiny_checkpoint

from cli import main
from skillrl.agents.llm import LLMAgent, LLMAgentConfig
from skillrl.policies import PolicyConfig, SamplingConfig, load_policy
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine
from trainers.update.config import GRPOConfig
from trainers.update.grpo import GRPOTrainer

TEMPLATE = (
    "### chat\n{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}"
)
"""Not SmolLM2's ChatML: a prompt that starts with ``### chat`` was rendered with it."""

ARCHITECTURES = ["qwen2", "gpt2"]


@pytest.fixture(scope="module", params=ARCHITECTURES)
def folder(request, tmp_path_factory) -> Path:
    made = tmp_path_factory.mktemp(request.param) / "model"
    return write_tiny_checkpoint(made, layers=2, architecture=request.param, chat_template=TEMPLATE)


@pytest.fixture(scope="module")
def policy(folder):
    return load_policy(PolicyConfig(model=str(folder), dtype="float32", device="cpu"))


def play(policy, episodes: int = 2):
    sampling = SamplingConfig(max_new_tokens=8, temperature=1.0, seed=0, stop=["</action>"])
    agent = LLMAgent(policy, config=LLMAgentConfig(sampling=sampling), uses_skills=False)
    engine = RolloutEngine(agent, config=RolloutConfig(max_turns=2))
    starts = [EpisodeStart("webshop", "test", 0, seed=i, group_id="g") for i in range(episodes)]
    return engine.run(starts)


def test_the_folder_plays_webshop_with_the_chat_template_it_ships(policy, folder):
    architecture = json.loads((folder / "config.json").read_text())["model_type"]
    assert type(policy.model).__name__.lower().startswith(architecture)
    records = play(policy)
    assert all(not r.error and r.num_turns >= 1 for r in records)
    turn = records[0].turns[0]
    prompt = policy.tokenizer.decode(turn.prompt_token_ids)
    assert prompt.startswith("### chat\n[system] ") and prompt.endswith("[assistant] ")
    assert turn.completion_token_ids and len(turn.completion_logprobs) == len(
        turn.completion_token_ids
    )


def test_candidate_scores_are_the_models_own_log_probs(policy):
    conversation = [{"role": "user", "content": "Buy a red ball."}]
    candidates = ["click[buy now]", "search[red ball]"]
    (scores,) = policy.score_continuations([conversation], [candidates])
    assert len(scores) == 2 and all(math.isfinite(s) for s in scores)
    # The candidate's summed log-prob after the rendered prompt, from one plain forward pass.
    tokenizer, model = policy.tokenizer, policy.model
    prompt = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    for candidate, score in zip(candidates, scores, strict=True):
        ids = tokenizer.encode(prompt + candidate, add_special_tokens=False)
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0].log_softmax(-1)
        own = ids[len(prompt_ids) :]
        expected = sum(float(logits[len(prompt_ids) - 1 + k, token]) for k, token in enumerate(own))
        assert score == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize("use_peft", [False, True], ids=["full", "lora"])
def test_grpo_trains_the_folder_on_its_own_episodes(policy, folder, use_peft):
    records = play(policy)
    advantages = [[1.0] * records[0].num_turns, [-1.0] * records[1].num_turns]
    model = type(policy.model).from_pretrained(folder)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    targets = ["c_attn"] if "GPT2" in type(model).__name__ else ["q_proj", "v_proj"]
    config = GRPOConfig(use_peft=use_peft, lora_target_modules=targets, learning_rate=1e-3)
    trainer = GRPOTrainer(model, config, pad_token_id=0)
    metrics = trainer.train_step(records, advantages)
    assert metrics.optimizer_steps >= 1 and metrics.grad_norm > 0
    # The update recomputes exactly the log-probs the rollout sampled with: GPT-2's configured
    # dropout (0.1) is off in the update, as it was in the rollout.
    assert metrics.logprob_gap_mean < 1e-4
    after = trainer.unwrapped_model
    after = after.merge_and_unload() if use_peft else after
    assert any(not torch.equal(before[k], v) for k, v in after.state_dict().items())


@pytest.mark.slow
def test_skillrl_train_and_eval_take_the_folder(folder, tmp_path):
    workspace = str(tmp_path / "ws")
    common = ["--workspace", workspace, "--model", str(folder), "--max-turns", "2"]
    trained = CliRunner().invoke(
        main,
        ["train", "--cycles", "1", "--no-skills", "--goals-per-cycle", "1", "--group-size", "2",
         "--eval-goals", "1", "--max-new-tokens", "4", "--threads", "1", "--run-name", "other",
         *common],
        catch_exceptions=False,
    )  # fmt: skip
    assert trained.exit_code == 0, trained.output
    rows = [json.loads(line) for line in (tmp_path / "ws/runs/other/metrics.jsonl").open()]
    assert rows[-1]["train.episodes"] >= 2 and rows[-1]["eval.episodes"] == 1
    evaluated = CliRunner().invoke(
        main,
        ["eval", "--skills", "off", "--goals", "2", "--samples", "1", "--k", "1", "--t", "1",
         "--max-new-tokens", "4", "--json", "--threads", "1", *common],
        catch_exceptions=False,
    )  # fmt: skip
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(evaluated.stdout)["arms"][0]["greedy"]["episodes"] == 2
