"""Adapter-only weight sync to a vLLM server, against vLLM's LoRA endpoints' HTTP contract.

vLLM cannot run here (no CUDA). A loopback HTTP server stands in for its LoRA endpoints and
records every request (``lora_endpoints``). TRL's client is the recording fake of
``test_policies_trl_vllm``; the peft model and the adapter files are real.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from lora_endpoints import Recorder, lora_server
from safetensors.torch import load_file
from test_policies_trl_vllm import FakeVLLMClient, tiny_llama, write_tokenizer

from skillrl.policies import PolicyConfig, load_policy
from skillrl.policies import trl_vllm_backend as backend
from skillrl_core.errors import BackendError, ConfigError


@pytest.fixture
def server():
    with lora_server() as url:
        yield url


@pytest.fixture
def policy(server, tmp_path, monkeypatch):
    FakeVLLMClient.instances.clear()
    monkeypatch.setattr(backend, "import_vllm_client", lambda: FakeVLLMClient)
    folder = write_tokenizer(tmp_path / "model")
    config = PolicyConfig(backend="trl-vllm", model=str(folder), base_url=server, adapter_sync=True)
    loaded = load_policy(config)
    yield loaded
    loaded.close()


def lora_model():
    from peft import LoraConfig, get_peft_model

    return get_peft_model(tiny_llama(), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"]))


def test_each_sync_loads_the_new_adapter_by_name_and_unloads_the_last(policy):
    model = lora_model()
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    policy.sync_weights(model)
    with torch.no_grad():
        layer.lora_B["default"].weight.fill_(0.5)  # the update
    policy.sync_weights(model)
    (first_path, first), (second_path, second), (third_path, third) = Recorder.requests
    assert first_path == second_path == "/v1/load_lora_adapter"
    assert third_path == "/v1/unload_lora_adapter"
    assert set(first) == set(second) == {"lora_name", "lora_path"} and set(third) == {"lora_name"}
    assert first["lora_name"] != second["lora_name"] and third["lora_name"] == first["lora_name"]
    # Every later generation and scoring request names the newest adapter.
    assert policy.client.model == second["lora_name"] and policy.syncs == 2
    # Only the adapter travels: no NCCL group, no full weights, no prefix-cache reset.
    assert policy.client.names() == []
    sent = Path(second["lora_path"])
    config = json.loads((sent / "adapter_config.json").read_text())
    assert config["r"] == 2 and config["target_modules"] == ["q_proj"]
    tensors = load_file(str(sent / "adapter_model.safetensors"))
    assert tensors and all("lora_" in name for name in tensors)
    (b_name,) = [n for n in tensors if "lora_B" in n]
    assert torch.equal(tensors[b_name], torch.full_like(tensors[b_name], 0.5))
    assert not Path(first["lora_path"]).exists()  # the unloaded adapter's files are gone
    policy.close()
    assert not sent.exists()


def test_a_server_without_runtime_lora_loading_is_a_backend_error_naming_the_fix(policy):
    Recorder.status = 404
    with pytest.raises(BackendError, match="answered 404.*--enable-lora"):
        policy.sync_weights(lora_model())
    assert policy.syncs == 0


def test_a_model_without_an_adapter_is_refused_before_any_request(policy):
    with pytest.raises(ConfigError, match="--use-peft"):
        policy.sync_weights(tiny_llama())
    assert Recorder.requests == [] and policy.client.names() == []


def test_an_unreachable_server_is_a_backend_error(tmp_path, monkeypatch):
    monkeypatch.setattr(backend, "import_vllm_client", lambda: FakeVLLMClient)
    folder = write_tokenizer(tmp_path / "model")
    config = PolicyConfig(
        backend="trl-vllm", model=str(folder), base_url="http://127.0.0.1:9", adapter_sync=True
    )
    with pytest.raises(BackendError, match="could not reach"):
        load_policy(config).sync_weights(lora_model())


def test_adapter_sync_is_only_for_the_trl_vllm_backend():
    with pytest.raises(ConfigError, match="adapter_sync sends LoRA adapters"):
        PolicyConfig(adapter_sync=True)
