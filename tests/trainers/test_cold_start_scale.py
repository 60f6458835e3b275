"""Cold start at scale: LoRA on the top layers only, DAgger keeping the learner's mistakes, replay
instead of retraining on everything, and the final model exported as one LoRA adapter."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_checkpoint import write_tiny_checkpoint

from skillrl.policies import PolicyConfig, load_policy
from skillrl.policies.model_settings import ModelSettings
from skillrl.policies.transformers_loading import load_causal_lm
from skillrl.prompts import PromptConfig
from skillrl_core.errors import ConfigError
from trainers.cold_start.adapter_export import export_adapter, export_checkpoint
from trainers.cold_start.cold_start import ColdStartRun, settings_of
from trainers.cold_start.cold_start_data import ExampleGatherer
from trainers.cold_start.sft import build_trainer
from trainers.cold_start.sft_config import ColdStartConfig
from trainers.cold_start.sft_data import TurnExample, write_examples

PROMPT = PromptConfig(max_prompt_tokens=900)


@pytest.fixture(scope="module")
def three_layers(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny3") / "model", layers=3)


def policy_of(folder):
    return load_policy(PolicyConfig(model=str(folder), dtype="float32", device="cpu"))


def example(
    i: int, round_index: int, action: str = "click[buy now]", learner: str = ""
) -> TurnExample:
    return TurnExample(
        prompt=[{"role": "system", "content": "s"}, {"role": "user", "content": f"u{i}"}],
        completion=[{"role": "assistant", "content": f"<action>{action}</action>"}],
        assistant_prefix="<action>",
        action=action,
        source="dagger" if round_index else "expert",
        round=round_index,
        split="train",
        goal_id=f"g{i}",
        goal_index=i,
        episode=i,
        turn=0,
        learner_action=learner,
    )


def test_lora_on_the_top_layers_trains_only_them(three_layers, tmp_path):
    policy = policy_of(three_layers)
    config = ColdStartConfig(skills=False, lora_layers=1, lora_target_modules=["q_proj", "v_proj"])
    trainer = build_trainer(
        policy.model, policy.tokenizer, [example(0, 0)], config, tmp_path / "out"
    )
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all(".layers.2." in n and "lora_" in n for n in trainable)
    with pytest.raises(ConfigError, match="exceeds the model's 3 decoder layers"):
        build_trainer(
            policy_of(three_layers).model, policy.tokenizer, [example(0, 0)],
            ColdStartConfig(skills=False, lora_layers=4), tmp_path / "out2",
        )  # fmt: skip


def test_use_cpu_keeps_the_sft_trainer_on_the_cpu(three_layers, tmp_path):
    # Without it HF Trainer takes CUDA whenever one is visible: bench_speed --device cpu on a GPU.
    config = ColdStartConfig(skills=False, use_peft=False)
    policy = policy_of(three_layers)
    examples = [example(0, 0)]
    trainer = build_trainer(
        policy.model, policy.tokenizer, examples, config, tmp_path / "out", use_cpu=True
    )
    assert trainer.args.use_cpu and trainer.args.device.type == "cpu"
    assert next(trainer.model.parameters()).device.type == "cpu"


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="dagger_keep"):
        ColdStartConfig(dagger_keep="some")
    with pytest.raises(ConfigError, match="dagger_replay"):
        ColdStartConfig(dagger_replay=-1.0)
    with pytest.raises(ConfigError, match="lora_layers"):
        ColdStartConfig(lora_layers=0)


def test_dagger_keeps_only_the_states_where_the_learner_was_wrong(three_layers):
    config = ColdStartConfig(skills=False, dagger_keep="mistakes", max_turns=4, dagger_goals=3)
    gatherer = ExampleGatherer(
        config, policy=policy_of(three_layers), bank=None, teacher=None,
        env_config={"max_turns": 4}, prompt_config=PROMPT,
    )  # fmt: skip
    gathered = gatherer.gather(1, [0, 1, 2])
    kept, dagger = gathered.examples, gathered.dagger
    assert dagger.states >= dagger.mistakes == len(kept) > 0
    assert all(e.learner_action != e.action for e in kept)
    everything = ExampleGatherer(
        ColdStartConfig(skills=False, max_turns=4), policy=gatherer.policy, bank=None,
        teacher=None, env_config={"max_turns": 4}, prompt_config=PROMPT,
    ).gather(1, [0, 1, 2])  # fmt: skip
    assert len(everything.examples) == dagger.states


def test_a_replaying_round_trains_on_its_examples_and_k_times_as_many_earlier_ones(
    three_layers, tmp_path
):
    run = ColdStartRun(
        ColdStartConfig(skills=False, dagger_rounds=2, dagger_replay=1.5),
        policy=policy_of(three_layers),
        run_dir=tmp_path / "sft",
        prompt_config=PROMPT,
    )
    write_examples(run.round_data(0), [example(i, 0) for i in range(10)])
    write_examples(run.round_data(1), [example(100 + i, 1) for i in range(2)])
    write_examples(run.round_data(2), [example(200 + i, 2) for i in range(4)])
    write_examples(run.dataset_path, [example(i, 0) for i in range(10)])
    assert len(run.training_examples(0)) == 10
    second = run.training_examples(2)
    assert [e.goal_index for e in second[:4]] == [200, 201, 202, 203]
    assert len(second) == 4 + 6 and all(e.round < 2 for e in second[4:])
    assert [e.goal_index for e in run.training_examples(2)] == [e.goal_index for e in second]
    aggregate = ColdStartRun(
        ColdStartConfig(skills=False, dagger_rounds=2),
        policy=run.policy,
        run_dir=tmp_path / "sft",
        prompt_config=PROMPT,
    )
    assert len(aggregate.training_examples(2)) == 10  # the dataset file: every round so far


def perturbed(folder, seed: int, rank: int, names=("q_proj", "down_proj")):
    _, model = load_causal_lm(str(folder), torch.float32)
    generator = torch.Generator().manual_seed(seed)
    for name, weight in model.named_parameters():
        if name.rpartition(".")[0].rpartition(".")[2] in names and ".layers.2." in name:
            out_features, in_features = weight.shape
            b = torch.randn(out_features, rank, generator=generator)
            a = torch.randn(rank, in_features, generator=generator)
            weight.data += 0.05 * b @ a
    return model


def test_a_low_rank_change_exports_exactly_and_loads_back(three_layers, tmp_path):
    _, base = load_causal_lm(str(three_layers), torch.float32)
    tuned = perturbed(three_layers, seed=1, rank=2)
    done = export_adapter(base, tuned, tmp_path / "adapter", rank=2, base_name=str(three_layers),
                          dtype=torch.float32)  # fmt: skip
    assert done.modules == 2 and done.kept_energy == pytest.approx(1.0)
    assert done.layers == 1  # q_proj and down_proj of one decoder layer
    _, loaded = load_causal_lm(str(tmp_path / "adapter"), torch.float32)
    ids = torch.tensor([[5, 9, 30, 41, 7]])
    with torch.no_grad():
        want, got, plain = tuned(ids).logits, loaded(ids).logits, base(ids).logits
    assert torch.allclose(want, got, atol=1e-5)
    assert not torch.allclose(want, plain, atol=1e-3)
    counted: list[tuple[int, int]] = []
    smaller = export_adapter(base, tuned, tmp_path / "r1", rank=1, base_name="x",
                             on_module=lambda *counts: counted.append(counts))  # fmt: skip
    assert smaller.kept_energy < 0.999
    assert counted == [(1, 2), (2, 2)]  # a counter per factorised module, for the progress bar


def test_only_lora_shaped_changes_export(three_layers, tmp_path):
    _, base = load_causal_lm(str(three_layers), torch.float32)
    with pytest.raises(ConfigError, match="equals the base model"):
        export_adapter(base, base, tmp_path / "same", rank=2, base_name="x")
    _, tuned = load_causal_lm(str(three_layers), torch.float32)
    tuned.model.norm.weight.data += 1.0
    with pytest.raises(ConfigError, match="model.norm.weight changed"):
        export_adapter(base, tuned, tmp_path / "norm", rank=2, base_name="x")
    assert not (tmp_path / "norm" / "adapter_model.safetensors").exists()


def test_an_exported_checkpoint_carries_its_settings(three_layers, tmp_path):
    tuned = perturbed(three_layers, seed=2, rank=1)
    tuned.save_pretrained(tmp_path / "checkpoint")
    settings = ModelSettings(env_id="webshop", skills=False, max_prompt_tokens=300)
    export_checkpoint(str(three_layers), tmp_path / "checkpoint", tmp_path / "adapter", rank=4,
                      settings=settings)  # fmt: skip
    assert ModelSettings.load(tmp_path / "adapter") == settings
    _, base = load_causal_lm(str(three_layers), torch.float32)
    smaller = export_adapter(base, tuned, tmp_path / "named", rank=1, base_name="embedded")
    config = json.loads((smaller.folder / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "embedded"  # not the path it was exported from
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_zero_goals_for_a_source_that_plays_them_is_refused_before_anything_loads():
    with pytest.raises(ConfigError, match=r"goals \(0\) must be >= 1: source 'expert'"):
        ColdStartConfig(goals=0)
    assert ColdStartConfig(goals=0, sources=("bank",)).goals == 0  # the bank's episodes suffice


def test_a_cold_starts_settings_keep_its_environment_options_but_not_its_turn_cap(tmp_path):
    config = ColdStartConfig(env_id="webshop", goals=2, max_turns=8)
    env_config = {"observation_mode": "text_rich", "max_turns": 8}
    settings = settings_of(config, 400, env_config, recipe="skillrl sft ...")
    assert settings.env_options == {"observation_mode": "text_rich"}
    settings.save(tmp_path)
    loaded = ModelSettings.load(tmp_path)
    assert loaded.env_options == {"observation_mode": "text_rich"}
    assert "observation_mode=text_rich" in loaded.describe()


def test_an_adapter_over_an_adapter_exports_as_one_adapter_over_the_base(three_layers, tmp_path):
    # A LoRA run started from a shipped adapter saves its adapter over that adapter.
    _, base = load_causal_lm(str(three_layers), torch.float32)
    first = tmp_path / "first"
    export_adapter(base, perturbed(three_layers, seed=1, rank=1), first, rank=1,
                   base_name=str(three_layers), dtype=torch.float32)  # fmt: skip
    tuned = perturbed(first, seed=3, rank=1)  # the adapter's model, changed once more
    _, over = load_causal_lm(str(first), torch.float32)
    export_adapter(over, tuned, tmp_path / "second", rank=1, base_name=str(first),
                   dtype=torch.float32)  # fmt: skip
    done = export_checkpoint(str(three_layers), tmp_path / "second", tmp_path / "one", rank=2)
    assert done.kept_energy == pytest.approx(1.0)
    config = json.loads((tmp_path / "one" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(three_layers)
    _, loaded = load_causal_lm(str(tmp_path / "one"), torch.float32)
    ids = torch.tensor([[5, 9, 30, 41, 7]])
    with torch.no_grad():
        assert torch.allclose(tuned(ids).logits, loaded(ids).logits, atol=1e-5)
