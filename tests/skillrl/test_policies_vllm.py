from __future__ import annotations

import importlib.util

import pytest

from skillrl.policies import PolicyConfig, SamplingConfig, load_policy
from skillrl_core.errors import DependencyNotInstalled

HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_missing_vllm_names_the_install_command():
    with pytest.raises(DependencyNotInstalled, match=r"pip install 'skillrl\[vllm\]'"):
        load_policy(PolicyConfig(backend="vllm", model="embedded"))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_VLLM, reason="needs vLLM")
def test_vllm_generates_and_scores(workspace):
    policy = load_policy(PolicyConfig(backend="vllm", model="embedded", workspace=workspace))
    conv = [{"role": "user", "content": "Say yes."}]
    (gen,) = policy.generate([conv], SamplingConfig(max_new_tokens=8))
    assert gen.completion_token_ids and len(gen.logprobs) == len(gen.completion_token_ids)
    ((a, b),) = policy.score_continuations([conv], [["Yes", "Zebra xylophone"]])
    assert a > b
