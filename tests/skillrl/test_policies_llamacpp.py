"""``--backend openai`` against a real OpenAI-compatible server: llama-cpp-python's, serving the
embedded GGUF on loopback. Skipped unless ``llama_cpp`` is installed (it compiles llama.cpp, so
it is not a dependency): ``pip install 'llama-cpp-python[server]'``, then
``python -m pytest -m llamacpp tests/skillrl/test_policies_llamacpp.py``."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import pytest

pytestmark = [pytest.mark.llamacpp, pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def llamacpp_server():
    pytest.importorskip("llama_cpp")
    pytest.importorskip("llama_cpp.server")
    from skillrl.policies.model_cache import embedded_gguf_path

    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(embedded_gguf_path())]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096"]
    # The backend asks for logprobs, which llama-cpp-python serves only with logits_all; the
    # alias is the --model name the test sends.
    command += ["--logits_all", "true", "--model_alias", "smollm2"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if server.poll() is not None:
                pytest.fail(f"llama_cpp.server exited: {server.stderr.read().decode()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not answer within 180 s")
            time.sleep(1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_an_episode_runs_against_llama_cpp_and_counts_its_tokens(llamacpp_server, workspace):
    from click.testing import CliRunner

    from cli import main

    args = ["run", "--backend", "openai", "--base-url", llamacpp_server, "--model", "smollm2"]
    args += ["--no-skills", "--no-record", "--max-turns", "3", "--json"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["summary"]["episodes"] == 1
    assert out["episodes"][0]["turns"] >= 1
    assert out["stats"]["generated_tokens"] > 0 and out["stats"]["tokens_per_second"] > 0
