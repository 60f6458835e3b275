"""The policy contract: chat in, text plus token ids and log-probs out, batched.

Every backend (transformers in-process, an OpenAI-compatible server, vLLM in-process) implements
:class:`ChatPolicy`. A conversation is a list of ``{"role": ..., "content": ...}`` messages; when
the last message has role ``assistant`` it is a *prefix* the model continues (used by constrained
decoding to generate only a search query after ``<action>search[``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from skillrl_core.errors import ConfigError
from skillrl_core.validation import check_finite_fields

Conversation = list[dict[str, str]]


def render_chat(tokenizer: Any, conversation: Conversation) -> str:
    """Render a conversation with the tokenizer's chat template as prompt text.

    A last message with role ``assistant`` is a prefix to continue (no end-of-turn after it);
    otherwise the generation prompt for a new assistant turn is appended.
    """
    prefix = bool(conversation) and conversation[-1]["role"] == "assistant"
    return tokenizer.apply_chat_template(
        conversation,
        tokenize=False,
        add_generation_prompt=not prefix,
        continue_final_message=prefix,
    )


def render_chat_ids(tokenizer: Any, conversation: Conversation) -> list[int]:
    """Token ids of :func:`render_chat` (the template already holds any special tokens)."""
    return tokenizer.encode(render_chat(tokenizer, conversation), add_special_tokens=False)


@dataclass
class SamplingConfig:
    """How to decode one batch."""

    max_new_tokens: int = 96
    """Upper bound on generated tokens per conversation."""
    temperature: float = 0.0
    """0 means greedy decoding; above 0, sampling at that temperature."""
    top_p: float = 1.0
    """Nucleus sampling mass (only when sampling)."""
    seed: int | None = None
    """Seed for sampling; the same seed and inputs give the same samples."""
    stop: list[str] = field(default_factory=list)
    """Stop strings; generation of a conversation ends after the first one (it is kept)."""
    json_schema: dict[str, Any] | None = None
    """A JSON schema the reply must follow, where the backend can enforce it (``openai``: sent
    as ``response_format``); other backends ignore it, so callers still validate the reply."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens ({self.max_new_tokens}) must be at least 1")
        if self.temperature < 0:
            raise ConfigError(f"temperature ({self.temperature}) must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p ({self.top_p}) must be in (0, 1]")

    @property
    def greedy(self) -> bool:
        """Whether decoding is greedy."""
        return self.temperature == 0


@dataclass
class Generation:
    """One conversation's completion."""

    text: str
    """The generated text (without the prompt and without end-of-turn tokens)."""
    prompt_token_ids: list[int] = field(default_factory=list)
    """Token ids of the rendered prompt (empty when the backend does not report them)."""
    completion_token_ids: list[int] = field(default_factory=list)
    """Generated token ids, including a final end-of-turn token if the model produced one."""
    logprobs: list[float] = field(default_factory=list)
    """Log-prob of each generated token under the sampling distribution (temperature applied)."""
    finish_reason: str = "stop"
    """``stop`` (end of turn or a stop string) or ``length`` (``max_new_tokens`` reached)."""
    prompt_tokens: int | None = None
    """Prompt tokens as the server counted them (its ``usage``), when it sends no token ids."""
    completion_tokens: int | None = None
    """Generated tokens as the server counted them, when it sends no token ids."""

    @property
    def prompt_token_count(self) -> int:
        """Prompt tokens: the ids' count, else the server's count, else 0."""
        return len(self.prompt_token_ids) or (self.prompt_tokens or 0)

    @property
    def completion_token_count(self) -> int:
        """Generated tokens: the ids' count, else the server's count, else 0."""
        return len(self.completion_token_ids) or (self.completion_tokens or 0)


@dataclass
class ScoredContinuation:
    """A candidate continuation scored by the model, with what training needs to reuse it."""

    text: str
    logprob: float
    """Sum of the candidate's token log-probs given the prompt."""
    prompt_token_ids: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    token_logprobs: list[float] = field(default_factory=list)


@runtime_checkable
class ChatPolicy(Protocol):
    """A chat model that generates and scores, many conversations per call."""

    name: str
    """Human-readable id, e.g. ``transformers:embedded``."""

    def generate(
        self, conversations: list[Conversation], sampling: SamplingConfig
    ) -> list[Generation]:
        """Return one :class:`Generation` per conversation, in order."""
        ...

    def score_continuations(
        self, conversations: list[Conversation], continuations: list[list[str]]
    ) -> list[list[float]]:
        """Sum log-prob of each candidate continuation of each conversation's assistant turn."""
        ...
