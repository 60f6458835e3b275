"""The trl-vllm backend against a fake ``VLLMClient``.

Mocks only for what cannot run here: TRL's client needs a ``trl vllm-serve`` server on a CUDA
GPU (and vLLM installed), which this machine does not have. Everything else is real: a
byte-level tokenizer with a chat template loaded with ``AutoTokenizer`` from a folder, real
(tiny) Llama and peft models for the weight sync, the real ``load_policy`` path.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from skillrl.policies import PolicyConfig, SamplingConfig, load_policy
from skillrl.policies import trl_vllm_backend as backend
from skillrl_core.errors import BackendError, ConfigError, DependencyNotInstalled

HAS_VLLM = importlib.util.find_spec("vllm") is not None
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CONV = [{"role": "user", "content": "Buy a red shirt."}]


def write_tokenizer(folder):
    """A byte-level tokenizer (one token per byte) with a ChatML template, saved to ``folder``."""
    vocab = {token: i for i, token in enumerate(["<pad>", "<|im_start|>", "<|im_end|>"])}
    for symbol in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<pad>", bos_token=None
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    return folder


class FakeVLLMClient:
    """Records calls; answers like TRL's ``VLLMClient`` (same keys and shapes)."""

    instances: list[FakeVLLMClient] = []
    reply = "<think>ok</think><action>click[buy now]</action> and more"
    tokenizer = None

    def __init__(
        self,
        base_url=None,
        host="0.0.0.0",
        server_port=8000,
        group_port=51216,
        connection_timeout=0.0,
    ):
        self.base_url = base_url
        self.connection_timeout = connection_timeout
        self.calls: list[tuple[str, dict]] = []
        FakeVLLMClient.instances.append(self)

    def generate(
        self,
        prompts,
        n=1,
        temperature=1.0,
        top_p=1.0,
        max_tokens=16,
        logprobs=0,
        generation_kwargs=None,
        **unused,
    ):
        self.calls.append(
            (
                "generate",
                {
                    "prompts": prompts,
                    "temperature": temperature,
                    "top_p": top_p,
                    "max_tokens": max_tokens,
                    "logprobs": logprobs,
                    "generation_kwargs": generation_kwargs,
                },
            )
        )
        ids = self.tokenizer.encode(self.reply, add_special_tokens=False)[:max_tokens]
        completions = [list(ids) for _ in prompts]
        # Each position lists a more likely token first, then the sampled one, as TRL sorts them.
        return {
            "prompt_ids": [list(p) for p in prompts],
            "completion_ids": completions,
            "logprobs": [[[-0.01, -0.5 - j / 100] for j in range(len(c))] for c in completions],
            "logprob_token_ids": [[[0, t] for t in c] for c in completions],
        }

    def get_sequence_logprobs(
        self,
        sequences,
        prompt_lengths,
        top_logprobs=100,
        temperature=1.0,
        chunk_size=0,
        max_concurrent_requests=4,
    ):
        self.calls.append(
            (
                "get_sequence_logprobs",
                {
                    "sequences": sequences,
                    "prompt_lengths": prompt_lengths,
                    "temperature": temperature,
                },
            )
        )
        actual = [
            [[-1.0] for _ in seq[n:]] for seq, n in zip(sequences, prompt_lengths, strict=True)
        ]
        ids = [[[t] for t in seq[n:]] for seq, n in zip(sequences, prompt_lengths, strict=True)]
        return {
            "logprobs": actual,
            "logprob_token_ids": ids,
            "actual_logprobs": actual,
            "actual_token_ids": ids,
        }

    def init_communicator(self, device=0):
        self.calls.append(("init_communicator", {"device": device}))

    def update_model_params(self, model):
        params = {n: p.detach().clone() for n, p in model.named_parameters()}
        self.calls.append(("update_model_params", {"params": params}))

    def update_named_params(self, metadata, named_params):
        # The real client broadcasts during the call, so copy now (the merge is undone after).
        params = {n: t.detach().clone() for n, t in named_params}
        self.calls.append(("update_named_params", {"metadata": metadata, "params": params}))

    def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache", {}))

    def close_communicator(self):
        self.calls.append(("close_communicator", {}))

    def names(self):
        return [name for name, _ in self.calls]


@pytest.fixture
def tokenizer_dir(tmp_path):
    return write_tokenizer(tmp_path / "model")


@pytest.fixture
def policy(tokenizer_dir, monkeypatch):
    FakeVLLMClient.instances.clear()
    monkeypatch.setattr(backend, "import_vllm_client", lambda: FakeVLLMClient)
    config = PolicyConfig(
        backend="trl-vllm", model=str(tokenizer_dir), base_url="http://127.0.0.1:8000"
    )
    loaded = load_policy(config)
    FakeVLLMClient.tokenizer = loaded.tokenizer
    return loaded


def tiny_llama():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config).eval()


def test_load_connects_to_the_base_url_with_the_model_tokenizer(policy):
    (client,) = FakeVLLMClient.instances
    assert client.base_url == "http://127.0.0.1:8000" and client.connection_timeout == 60.0
    assert isinstance(policy, backend.TRLVLLMServerPolicy)
    assert policy.name.startswith("trl-vllm:") and policy.count_tokens("abc") == 3


def test_generate_returns_ids_and_sampled_logprobs_cut_after_the_stop_string(policy):
    sampling = SamplingConfig(max_new_tokens=96, temperature=0.7, seed=5, stop=["</action>"])
    (gen,) = policy.generate([CONV], sampling)
    assert gen.text == "<think>ok</think><action>click[buy now]</action>"
    assert gen.finish_reason == "stop"
    assert policy.tokenizer.decode(gen.completion_token_ids) == gen.text
    n = len(gen.completion_token_ids)
    # The sampled token's log-prob, not the more likely token's listed first.
    assert gen.logprobs == pytest.approx([-0.5 - j / 100 for j in range(n)])
    ((_, sent),) = policy.client.calls
    assert sent["prompts"] == [gen.prompt_token_ids]
    assert policy.tokenizer.decode(gen.prompt_token_ids).endswith("<|im_start|>assistant\n")
    assert sent["temperature"] == 0.7 and sent["max_tokens"] == 96 and sent["logprobs"] == 0
    assert sent["generation_kwargs"] == {
        "stop": ["</action>"],
        "include_stop_str_in_output": True,
        "seed": 5,
    }


def test_generate_without_a_stop_string_reports_the_length_limit(policy):
    (gen,) = policy.generate([CONV], SamplingConfig(max_new_tokens=6))
    assert gen.text == "<think" and len(gen.completion_token_ids) == 6
    assert gen.finish_reason == "length"
    assert policy.client.calls[0][1]["generation_kwargs"] == {}  # greedy: no seed, no stop
    assert policy.generate([], SamplingConfig()) == []


def test_a_trailing_assistant_message_is_continued_without_an_end_of_turn(policy):
    conv = [*CONV, {"role": "assistant", "content": "<action>search["}]
    prompt = policy.render(conv)
    text = policy.tokenizer.decode(prompt)
    assert text.endswith("<|im_start|>assistant\n<action>search[")
    assert "<|im_end|>" not in text.split("<|im_start|>assistant\n")[-1]


def test_scoring_uses_prompt_logprobs_of_prompt_plus_candidate(policy):
    conv = [*CONV, {"role": "assistant", "content": "<action>click["}]
    (row,) = policy.score_continuations_detailed([conv], [["buy now]", "back]"]])
    prompt = policy.render(conv)
    assert [c.text for c in row] == ["buy now]", "back]"]
    assert [c.logprob for c in row] == [-8.0, -5.0]
    assert row[0].prompt_token_ids == prompt and row[0].token_logprobs == [-1.0] * 8
    assert policy.tokenizer.decode(row[1].token_ids) == "back]"
    ((name, sent),) = policy.client.calls
    assert name == "get_sequence_logprobs" and sent["temperature"] == 1.0
    assert sent["prompt_lengths"] == [len(prompt)] * 2
    assert sent["sequences"][1] == prompt + row[1].token_ids
    assert policy.score_continuations([conv, conv], [["a"], []]) == [[-1.0], []]


def test_weight_sync_opens_the_group_once_then_pushes_and_resets_each_time(policy):
    model = tiny_llama()
    assert policy.sync_weights(model) >= 0
    with torch.no_grad():
        model.model.norm.weight.add_(1.0)
    policy.sync_weights(model)
    assert policy.client.names() == [
        "init_communicator",
        "update_model_params",
        "reset_prefix_cache",
        "update_model_params",
        "reset_prefix_cache",
    ]
    assert policy.client.calls[0][1]["device"] == torch.device("cpu")
    second = policy.client.calls[3][1]["params"]
    assert torch.equal(second["model.norm.weight"], model.model.norm.weight)
    assert policy.syncs == 2
    policy.close()
    assert policy.client.names()[-1] == "close_communicator"


def test_lora_sync_pushes_merged_weights_under_base_names_and_unmerges(policy):
    from peft import LoraConfig, get_peft_model

    base_names = {n for n, _ in tiny_llama().named_parameters()}
    model = get_peft_model(tiny_llama(), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"]))
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    with torch.no_grad():
        layer.lora_B["default"].weight.fill_(0.5)
    before = layer.base_layer.weight.detach().clone()
    delta = layer.get_delta_weight("default").detach().clone()
    policy.sync_weights(model)
    assert policy.client.names() == [
        "init_communicator",
        "update_named_params",
        "reset_prefix_cache",
    ]
    pushed = policy.client.calls[1][1]
    assert set(pushed["params"]) == base_names
    assert [m[0] for m in pushed["metadata"]] == list(pushed["params"])
    q = pushed["params"]["model.layers.0.self_attn.q_proj.weight"]
    assert torch.allclose(q, before + delta) and not torch.allclose(q, before)
    assert torch.allclose(layer.base_layer.weight, before, atol=1e-6)  # unmerged again
    assert not layer.merged


def test_client_failures_become_backend_errors(policy):
    def broken(**kwargs):
        raise Exception("Request failed: 500, boom")

    policy.client.generate = broken
    with pytest.raises(BackendError, match="could not generate: Request failed: 500"):
        policy.generate([CONV], SamplingConfig())


def test_base_url_is_required():
    with pytest.raises(ConfigError, match="base_url is required for backend 'trl-vllm'"):
        PolicyConfig(backend="trl-vllm")


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_missing_vllm_names_the_install_command(tokenizer_dir):
    config = PolicyConfig(backend="trl-vllm", model=str(tokenizer_dir), base_url="http://x:8000")
    with pytest.raises(
        DependencyNotInstalled, match=r"vLLM in the training process.*skillrl\[vllm\]"
    ):
        load_policy(config)


def test_missing_trl_client_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "trl.generation.vllm_client", None)
    with pytest.raises(DependencyNotInstalled, match=r"pip install 'trl>=1.16'"):
        backend.import_vllm_client()


def test_importing_the_policies_package_does_not_import_trl():
    import subprocess

    code = "import sys, skillrl.policies; print('trl' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_fake_client_accepts_only_what_trls_client_accepts():
    import inspect

    from trl.generation.vllm_client import VLLMClient

    methods = ["__init__", "generate", "get_sequence_logprobs", "init_communicator"]
    methods += ["update_model_params", "update_named_params", "reset_prefix_cache"]
    for method in [*methods, "close_communicator"]:
        real = set(inspect.signature(getattr(VLLMClient, method)).parameters)
        fake = set(inspect.signature(getattr(FakeVLLMClient, method)).parameters) - {"unused"}
        assert fake <= real, method
