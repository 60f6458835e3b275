"""The OpenAI-compatible backend against a real HTTP server started by the test."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from skillrl.policies import PolicyConfig, SamplingConfig, load_policy
from skillrl.policies.openai_backend import OpenAIPolicy
from skillrl_core.errors import BackendError


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[dict] = []
        self.fail_first = 0
        self.status = 200
        self.token_ids = True  # vLLM's return_tokens_as_token_ids; llama.cpp sends none
        self.usage: dict | None = None
        self.content: str | None = None  # a fixed reply instead of echoing the user
        self.reject_schema = False  # answer HTTP 400 to a response_format, as some servers do

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:
        server: ChatServer = self.server  # type: ignore[assignment]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server.requests.append(
            {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
        )
        if server.fail_first > 0:
            server.fail_first -= 1
            return self._send(503, {"error": "warming up"})
        if server.status != 200:
            return self._send(server.status, {"error": {"message": "model 'x' does not exist"}})
        if server.reject_schema and "response_format" in body:
            return self._send(400, {"error": {"message": "response_format is not supported"}})
        user = body["messages"][-1]["content"]
        reply = server.content or f"<think>ok</think><action>search[{user}]</action>"
        tokens = [
            {"token": f"token_id:{i}" if server.token_ids else "ab", "logprob": -0.25}
            for i in range(5)
        ]
        payload = {
            "choices": [
                {
                    "message": {"role": "assistant", "content": reply},
                    "logprobs": {"content": tokens},
                    "finish_reason": "stop",
                }
            ]
        }
        if server.usage is not None:
            payload["usage"] = server.usage
        self._send(200, payload)

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server():
    srv = ChatServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_generates_one_reply_per_conversation_in_order(server):
    policy = load_policy(
        PolicyConfig(backend="openai", model="tiny", base_url=server.url, api_key="k")
    )
    convs = [[{"role": "user", "content": f"item {i}"}] for i in range(5)]
    gens = policy.generate(convs, SamplingConfig(max_new_tokens=12, stop=["</action>"], seed=3))
    assert [g.text for g in gens] == [
        f"<think>ok</think><action>search[item {i}]</action>" for i in range(5)
    ]
    assert gens[0].logprobs == [-0.25] * 5 and gens[0].completion_token_ids == [0, 1, 2, 3, 4]
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer k"
    assert request["body"]["model"] == "tiny" and request["body"]["max_tokens"] == 12
    assert request["body"]["stop"] == ["</action>"] and request["body"]["seed"] == 3


def test_transient_errors_are_retried(server):
    server.fail_first = 2
    policy = OpenAIPolicy(server.url, "tiny", max_retries=3, backoff_s=0.01)
    (gen,) = policy.generate([[{"role": "user", "content": "x"}]], SamplingConfig())
    assert gen.text.endswith("search[x]</action>") and len(server.requests) == 3


def test_retries_run_out_with_a_clear_error(server):
    server.fail_first = 10
    policy = OpenAIPolicy(server.url, "tiny", max_retries=1, backoff_s=0.01)
    with pytest.raises(BackendError, match="failed after 2 attempts.*HTTP 503"):
        policy.generate([[{"role": "user", "content": "x"}]], SamplingConfig())


def test_client_errors_are_not_retried_and_name_the_cause(server):
    server.status = 404
    policy = OpenAIPolicy(server.url, "x", max_retries=3, backoff_s=0.01)
    with pytest.raises(BackendError, match="HTTP 404.*does not exist"):
        policy.generate([[{"role": "user", "content": "x"}]], SamplingConfig())
    assert len(server.requests) == 1


def test_unreachable_server_is_a_backend_error():
    policy = OpenAIPolicy("http://127.0.0.1:9/v1", "x", max_retries=1, backoff_s=0.01, timeout_s=2)
    with pytest.raises(BackendError, match="is the server running"):
        policy.generate([[{"role": "user", "content": "x"}]], SamplingConfig())


def test_scoring_is_refused_clearly_and_config_needs_a_url(server):
    policy = OpenAIPolicy(server.url, "x")
    with pytest.raises(BackendError, match="cannot score"):
        policy.score_continuations([[{"role": "user", "content": "x"}]], [["a"]])
    with pytest.raises(ValueError, match="base_url is required"):
        PolicyConfig(backend="openai")


def test_token_counts_come_from_the_servers_usage_when_it_sends_no_ids(server):
    server.token_ids = False
    server.usage = {"prompt_tokens": 321, "completion_tokens": 17, "total_tokens": 338}
    policy = OpenAIPolicy(server.url, "tiny")
    (gen,) = policy.generate([[{"role": "user", "content": "x"}]], SamplingConfig())
    assert gen.completion_token_ids == []
    assert (gen.prompt_token_count, gen.completion_token_count) == (321, 17)


def test_run_stats_count_the_servers_tokens(server, workspace):
    from click.testing import CliRunner

    from cli import main

    server.token_ids = False
    server.usage = {"prompt_tokens": 400, "completion_tokens": 9, "total_tokens": 409}
    args = ["run", "--backend", "openai", "--base-url", server.url, "--model", "tiny"]
    args += ["--no-skills", "--no-record", "--max-turns", "2", "--json"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)["stats"]
    turns = len(server.requests)
    assert turns >= 1
    assert stats["generated_tokens"] == 9 * turns and stats["prompt_tokens"] == 400 * turns
    assert stats["tokens_per_second"] > 0


def teacher_episode():
    from skillrl_core.records import EpisodeRecord, TurnRecord

    turn = TurnRecord(0, "search page", ["search[...]"], "search[red shirt]", True, 0.0, True)
    return EpisodeRecord("webshop", "g1", "buy a red shirt", "fashion", [turn], score=0.0)


TEACHER_REPLY = json.dumps(
    {
        "entries": [
            {
                "kind": "task",
                "title": "Search with the product type",
                "principle": "Put the product type and its key attributes in the first search.",
                "when_to_apply": "on the search page",
            }
        ]
    }
)


def test_the_teacher_sends_the_entry_schema_as_response_format(server):
    from skillrl.distill.schema import ENTRIES_SCHEMA
    from skillrl.distill.teacher import TeacherDistiller

    server.content = TEACHER_REPLY
    [draft] = TeacherDistiller(OpenAIPolicy(server.url, "teacher")).distill([teacher_episode()])
    assert draft.title == "Search with the product type"
    fmt = server.requests[0]["body"]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == ENTRIES_SCHEMA
    entry = ENTRIES_SCHEMA["properties"]["entries"]["items"]
    assert set(entry["properties"]["kind"]["enum"]) == {"task", "general", "mistake"}


def test_a_server_rejecting_the_schema_is_asked_without_it_once_and_for_all(server):
    from skillrl.distill.teacher import TeacherDistiller

    server.content, server.reject_schema = TEACHER_REPLY, True
    policy = OpenAIPolicy(server.url, "teacher", max_retries=0)
    distiller = TeacherDistiller(policy)
    assert len(distiller.distill([teacher_episode()])) == 1
    assert len(distiller.distill([teacher_episode()])) == 1
    sent = ["response_format" in r["body"] for r in server.requests]
    assert sent == [True, False, False]  # rejected once, then never sent again


def test_a_400_that_is_not_about_the_schema_is_still_an_error(server):
    server.status = 400
    policy = OpenAIPolicy(server.url, "x", max_retries=0)
    sampling = SamplingConfig(json_schema={"type": "object"})
    with pytest.raises(BackendError, match="HTTP 400"):
        policy.generate([[{"role": "user", "content": "x"}]], sampling)
    assert policy.schema_supported
