"""A policy served over HTTP by any OpenAI-compatible ``/v1/chat/completions`` server.

Works with ``vllm serve``, llama.cpp's server and hosted endpoints. Each conversation is one
request (servers batch concurrent requests themselves), sent concurrently from a thread pool.
Transient failures (connection errors, timeouts, HTTP 429 and 5xx) are retried with exponential
backoff; what remains becomes a :class:`BackendError` naming the server and the cause.

Token ids are reported only when the server returns them (vLLM does with
``return_tokens_as_token_ids``); log-probs come from ``logprobs``; token counts come from the
server's ``usage`` when there are no ids. A sampling config with a ``json_schema`` is sent as
``response_format={"type": "json_schema", ...}``; a server that rejects that with HTTP 400 is
asked again without it, and not sent it again (the caller validates replies anyway).

Scoring arbitrary continuations is not part of the chat API, so
:meth:`OpenAIPolicy.score_continuations` raises: use free decoding with this backend.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from skillrl.policies.base import Conversation, Generation, SamplingConfig
from skillrl.policies.config import PolicyConfig
from skillrl_core.errors import BackendError

logger = logging.getLogger(__name__)

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_CONCURRENT_REQUESTS = 16


class OpenAIPolicy:
    """Chat completions from an OpenAI-compatible server."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{model}"
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.schema_supported = True
        """False once the server rejected ``response_format`` (it is not sent again)."""
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=self.base_url, timeout=timeout_s, headers=headers, transport=transport
        )

    @classmethod
    def from_config(cls, config: PolicyConfig) -> OpenAIPolicy:
        """Build from a :class:`PolicyConfig` with ``backend="openai"``."""
        return cls(
            config.base_url or "",
            config.model,
            api_key=config.api_key or os.environ.get("OPENAI_API_KEY"),
            timeout_s=config.timeout_s,
            max_retries=config.max_retries,
        )

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def count_tokens(self, text: str) -> int:
        """Estimate tokens (the server's tokenizer is not available here)."""
        return (len(text) + 3) // 4

    def generate(
        self, conversations: list[Conversation], sampling: SamplingConfig
    ) -> list[Generation]:
        """One request per conversation, sent concurrently; results in input order."""
        if not conversations:
            return []
        workers = min(MAX_CONCURRENT_REQUESTS, len(conversations))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda c: self._generate_one(c, sampling), conversations))

    def _generate_one(self, conversation: Conversation, sampling: SamplingConfig) -> Generation:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": conversation,
            "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "logprobs": True,
        }
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if conversation and conversation[-1]["role"] == "assistant":
            # vLLM's extension for continuing a partial assistant message.
            body.update(add_generation_prompt=False, continue_final_message=True)
        if sampling.json_schema is not None and self.schema_supported:
            schema = {"name": "reply", "schema": sampling.json_schema}
            try:
                data = self._post(
                    "/chat/completions",
                    {**body, "response_format": {"type": "json_schema", "json_schema": schema}},
                )
                return _generation_from(data, sampling)
            except _BadRequest as error:
                data = self._post("/chat/completions", body)  # raises if the 400 was not ours
                self.schema_supported = False  # the schema was the problem: never send it again
                logger.warning(
                    "%s rejected response_format json_schema (%s); not sending it again",
                    self.base_url,
                    error,
                )
                return _generation_from(data, sampling)
        data = self._post("/chat/completions", body)
        return _generation_from(data, sampling)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        last_error = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                response = self._client.post(path, json=body)
            except httpx.TransportError as error:  # connection refused, timeouts, ...
                last_error = f"{type(error).__name__}: {error}"
                continue
            if response.status_code in _RETRYABLE_STATUS:
                last_error = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code >= 400:
                error = _BadRequest if response.status_code == 400 else BackendError
                raise error(
                    f"{self.base_url}{path} answered HTTP {response.status_code}: "
                    f"{response.text[:300]}"
                )
            try:
                return response.json()
            except ValueError as error:
                raise BackendError(f"{self.base_url}{path} returned invalid JSON") from error
        raise BackendError(
            f"{self.base_url}{path} failed after {self.max_retries + 1} attempts ({last_error}); "
            "is the server running and the base URL right (it usually ends in /v1)?"
        )

    def score_continuations(
        self, conversations: list[Conversation], continuations: list[list[str]]
    ) -> list[list[float]]:
        """Not available over the chat completions API."""
        raise BackendError(
            "the openai backend cannot score candidate actions (the chat API has no prompt "
            "log-probs); use free decoding, or --backend transformers/vllm for --constrained"
        )


class _BadRequest(BackendError):
    """HTTP 400: the server refused the request itself (e.g. a ``response_format`` it lacks)."""


def _usage(data: dict[str, Any], key: str) -> int | None:
    value = (data.get("usage") or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _generation_from(data: dict[str, Any], sampling: SamplingConfig) -> Generation:
    try:
        choice = data["choices"][0]
        text = choice["message"]["content"] or ""
    except (KeyError, IndexError, TypeError) as error:
        raise BackendError(f"unexpected chat completion response: {str(data)[:300]}") from error
    content = (choice.get("logprobs") or {}).get("content") or []
    logprobs = [float(item.get("logprob", 0.0)) for item in content]
    token_ids = [_token_id(item.get("token", "")) for item in content]
    finish = choice.get("finish_reason") or "stop"
    # Servers strip the stop string from the text; keep it, as the transformers backend does.
    if finish == "stop" and sampling.stop and not any(text.endswith(s) for s in sampling.stop):
        stop_reason = choice.get("stop_reason")
        if isinstance(stop_reason, str) and stop_reason in sampling.stop:
            text += stop_reason
    return Generation(
        text=text,
        prompt_token_ids=[],
        completion_token_ids=[t for t in token_ids if t is not None]
        if all(t is not None for t in token_ids)
        else [],
        logprobs=logprobs,
        finish_reason="length" if finish == "length" else "stop",
        prompt_tokens=_usage(data, "prompt_tokens"),
        completion_tokens=_usage(data, "completion_tokens"),
    )


def _token_id(token: str) -> int | None:
    """VLLM's ``return_tokens_as_token_ids`` renders tokens as ``token_id:<n>``."""
    if token.startswith("token_id:"):
        try:
            return int(token.split(":", 1)[1])
        except ValueError:
            return None
    return None
