"""Build one compact chat prompt per turn, within a token budget.

The prompt holds the task, this turn's retrieved skills (general, task-specific, mistakes to
avoid), a short window of recent turns, the current observation and the admissible actions. The
policy is small (135M parameters on two CPU cores), so every part is kept short and the whole is
capped at :attr:`PromptConfig.max_prompt_tokens`: when over, history shrinks first (oldest turn
first), then skills (mistakes, then task skills, then general ones, lowest-ranked first), then the
observation is cut.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from memory.types import RetrievedEntry
from skillrl.agent import AgentState
from skillrl.parsing import is_search_page
from skillrl.policies.base import Conversation
from skillrl_core.errors import ConfigError
from skillrl_core.validation import check_finite_fields

CountTokens = Callable[[str], int]
PARTS: tuple[str, ...] = ("system", "task", "skills", "history", "observation", "actions", "format")

SYSTEM_PROMPT = (
    "You are a web shopping agent. Buy the product that best matches the task: search, open a "
    "matching product, click the wanted options, then click buy now. Use the skills given."
)
FORMAT_FREE = (
    "Reply with a short thought and exactly one admissible action, like:\n"
    "<think>reason</think><action>click[...]</action>"
)
FORMAT_SEARCH = "Reply with <action>search[key words]</action> using the product words of the task."


@dataclass
class PromptConfig:
    """What goes into a turn's prompt and how large it may get."""

    max_prompt_tokens: int = 900
    """Token budget for the whole prompt (history shrinks first, then skills, then observation)."""
    history_turns: int = 3
    """Recent turns shown (their actions and whether they were valid)."""
    max_observation_tokens: int = 360
    """The observation is cut to this many tokens before the budget is applied."""
    max_actions: int = 40
    """At most this many admissible actions are listed."""
    max_skill_chars: int = 220
    """Each skill's text is cut to this many characters."""
    think: bool = True
    """Ask for a ``<think>`` section before the action (free decoding only)."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.max_prompt_tokens < 16:
            raise ConfigError(f"max_prompt_tokens ({self.max_prompt_tokens}) must be at least 16")
        for name in ("history_turns", "max_observation_tokens", "max_actions", "max_skill_chars"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} ({getattr(self, name)}) must be >= 0")


@dataclass
class BuiltPrompt:
    """A rendered turn prompt plus what it contains."""

    messages: Conversation
    token_counts: dict[str, int]
    """Tokens per part (:data:`PARTS`); their sum approximates the prompt size."""
    skill_ids: list[str] = field(default_factory=list)
    """Ids of the skills that fit in the prompt, in prompt order."""
    history_turns: int = 0
    """Recent turns that fit."""

    @property
    def total_tokens(self) -> int:
        """Sum of the per-part token counts."""
        return sum(self.token_counts.values())


def build_prompt(state: AgentState, config: PromptConfig, count: CountTokens) -> BuiltPrompt:
    """Build the prompt for ``state`` within ``config.max_prompt_tokens``."""
    skills = list(state.skills.all) if state.skills is not None else []
    history = state.history[-config.history_turns :] if config.history_turns else []
    observation = _cut_tokens(_strip_instruction(state), config.max_observation_tokens, count)
    fixed = {
        "system": count(SYSTEM_PROMPT),
        "task": count(_task_text(state)),
        "actions": count(_actions_text(state.available_actions, config)),
        "format": count(_format_text(state, config)),
    }
    while True:
        parts = dict(fixed)
        parts["skills"] = count(_skills_text(skills, config)) if skills else 0
        parts["history"] = count(_history_text(history)) if history else 0
        parts["observation"] = count(observation)
        excess = sum(parts.values()) - config.max_prompt_tokens
        if excess <= 0:
            break
        if history:
            history = history[1:]
        elif skills:
            skills = _drop_one_skill(skills)
        else:
            observation = _cut_tokens(observation, max(parts["observation"] - excess, 0), count)
            parts["observation"] = count(observation)
            break
    user = _user_text(state, config, skills, history, observation)
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
    counts = {name: parts.get(name, 0) for name in PARTS}
    return BuiltPrompt(messages, counts, [r.entry.id for r in skills], len(history))


def _drop_one_skill(skills: list[RetrievedEntry]) -> list[RetrievedEntry]:
    """Drop the least valuable skill: mistakes first, then task skills, then general, last first."""
    for kind in ("mistake", "task", "general"):
        for i in range(len(skills) - 1, -1, -1):
            if skills[i].entry.kind == kind:
                return skills[:i] + skills[i + 1 :]
    return skills[:-1]


def _user_text(
    state: AgentState,
    config: PromptConfig,
    skills: list[RetrievedEntry],
    history: list,
    observation: str,
) -> str:
    sections = [_task_text(state)]
    if skills:
        sections.append(_skills_text(skills, config))
    if history:
        sections.append(_history_text(history))
    sections.append(f"Observation: {observation}")
    sections.append(_actions_text(state.available_actions, config))
    sections.append(_format_text(state, config))
    return "\n\n".join(sections)


def _task_text(state: AgentState) -> str:
    return f"Task: {state.instruction}"


def _skills_text(skills: list[RetrievedEntry], config: PromptConfig) -> str:
    labels = {"general": "tip", "task": "tip", "mistake": "avoid"}
    lines = ["Skills:"]
    for retrieved in skills:
        entry = retrieved.entry
        body = entry.principle
        if entry.kind == "mistake" and entry.correction:
            body = f"{entry.principle} Instead: {entry.correction}"
        text = f"{entry.title}: {body}"[: config.max_skill_chars]
        lines.append(f"- ({labels.get(entry.kind, entry.kind)}) {text}")
    return "\n".join(lines)


def _history_text(history: list) -> str:
    lines = ["Recent actions:"]
    for turn in history:
        flag = "" if turn.action_valid else " (invalid, nothing happened)"
        lines.append(f"- {turn.action}{flag}")
    return "\n".join(lines)


def _actions_text(actions: list[str], config: PromptConfig) -> str:
    if is_search_page(actions):
        return "Actions: search with key words"
    shown = actions[: config.max_actions]
    more = f" (+{len(actions) - len(shown)} more)" if len(actions) > len(shown) else ""
    return "Actions: " + ", ".join(shown) + more


def _format_text(state: AgentState, config: PromptConfig) -> str:
    if is_search_page(state.available_actions):
        return FORMAT_SEARCH
    if config.think:
        return FORMAT_FREE
    return "Reply with exactly one admissible action, like:\n<action>click[...]</action>"


def _strip_instruction(state: AgentState) -> str:
    """Remove the task text the observation repeats (it is already in the prompt once)."""
    observation = state.observation
    if state.instruction and state.instruction in observation:
        observation = observation.replace(f"Instruction: [SEP] {state.instruction} [SEP] ", "")
        observation = observation.replace(state.instruction, "(the task)")
    return observation.strip()


def _cut_tokens(text: str, limit: int, count: CountTokens) -> str:
    """Cut ``text`` to at most ``limit`` tokens (by words, so no token is split)."""
    if count(text) <= limit:
        return text
    words = text.split()
    low, high = 0, len(words)
    while low < high:  # the longest word prefix that fits
        middle = (low + high + 1) // 2
        if count(" ".join(words[:middle]) + " ...") <= limit:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low]) + " ..." if low else ""


def estimate_tokens(text: str) -> int:
    """Estimate tokens without a tokenizer (about 4 characters per token)."""
    return (len(text) + 3) // 4
