"""Build one compact chat prompt per turn, within a token budget.

What stays the same leads, so that a KV cache can share it: the system message holds
the environment's role and grammar and the reply format (the same for every episode of an
environment), the user message opens with the task (the same on every turn of an episode); then
come the per-turn parts: this turn's retrieved skills (general, task-specific, mistakes to
avoid; at most :attr:`PromptConfig.max_skills` of them, each as its one-line title), a short
window of recent turns, the current observation and the admissible actions.
Everything environment-specific comes from the environment's :class:`envs.adapter.PromptText`
(looked up by ``state.env_id``). The policy is small (135M parameters on two CPU cores), so
every part is kept short and the whole is capped at :attr:`PromptConfig.max_prompt_tokens`: when
over, skills go first (mistakes, then task skills, then general ones, lowest-ranked first) down
to :attr:`PromptConfig.min_skills`, those shrink to their short form, then history goes (oldest
turn first), then the observation is cut. Only a page too long for even that loses its last
skills.

A turn keeps at least one skill because the long pages are the decisions: a results page (ten
titles) had filled the budget on its own, so the agent chose which product to open with no skill
in the prompt on every such turn. One short skill costs about 25 tokens: the tail of a long
page.

The recent actions outlast the skills because they are the agent's state: WebShop's text page
does not show which options were already clicked, so without them the prompts before and after
clicking "grey" are identical and no policy can tell whether to click "grey", "10" or buy now
(a cold-started policy that lost its history at a 512-token budget bought without options on
every goal). They cost a few tokens per turn; a skill costs about fifty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import envs
from envs.adapter import PromptText
from memory.types import RetrievedEntry
from skillrl.agents.base import AgentState
from skillrl.policies.base import Conversation
from skillrl_core.errors import ConfigError
from skillrl_core.option_fields import option
from skillrl_core.validation import check_finite_fields

CountTokens = Callable[[str], int]
PARTS: tuple[str, ...] = ("system", "format", "task", "skills", "history", "observation", "actions")
"""The prompt's parts, in prompt order: the fixed ones first, the per-turn ones after."""


SKILL_FORMS: tuple[str, ...] = ("title", "full")
"""How entries are written into prompts (:attr:`PromptConfig.skill_form`)."""

DEFAULT_MAX_PROMPT_TOKENS = 512
"""The embedded model's prompt budget. Measured on the cold-started policy (BC + DAgger with
skills, 50 test goals, docs/results.md "Prompt budget at run time"): 384 / 512 / 900 tokens
gave 9 / 10 / 10 successes and 0.67 / 0.85 / 1.18 s per turn. 900 bought nothing for 39% more
time per turn. 384 was no worse within the sample, but the cold start trains at 512, and 512
leaves room for skills."""


@dataclass
class PromptConfig:
    """What goes into a turn's prompt and how large it may get."""

    max_prompt_tokens: int = option(
        DEFAULT_MAX_PROMPT_TOKENS,
        help="Token budget of each turn's prompt (skills shrink first, then older actions, then "
        "the observation).",
        low=16,
    )
    history_turns: int = 3
    """Recent turns shown (their actions and whether they were valid)."""
    max_observation_tokens: int = 360
    """The observation is cut to this many tokens before the budget is applied."""
    max_actions: int = 40
    """At most this many admissible actions are listed."""
    max_skills: int = 3
    """Most entries a prompt holds (0: no cap). Past the cap a turn keeps the best entry of each
    kind first (task skill, mistake note, general skill), then the next best by kind, so the
    entries that differ from goal to goal are the ones kept. Three short entries cost about 40
    tokens: a turn's compute grows by about a tenth, not a third (``bench_skill_value``)."""
    skill_form: str = "title"
    """How an entry is written into the prompt: ``title`` (its one-line title, which names the
    decision: "Select the requested size before Buy Now"; the full text stays in the bank) or
    ``full`` (title, principle and a note's correction, cut to :attr:`max_skill_chars`)."""
    max_skill_chars: int = 220
    """Each skill's text is cut to this many characters."""
    min_skills: int = 1
    """Skills a turn's prompt keeps past the budget: they shrink to their short form and the
    observation is cut to make room (0: every skill may go)."""
    short_skill_chars: int = 90
    """A kept skill's short form: its text cut to this many characters."""
    think: bool = True
    """Ask for a ``<think>`` section before the action (free decoding only)."""

    def __post_init__(self) -> None:
        check_finite_fields(self)  # and max_prompt_tokens' declared bound
        if self.skill_form not in SKILL_FORMS:
            raise ConfigError(f"skill_form ({self.skill_form!r}) must be one of {SKILL_FORMS}")
        for name in (
            "history_turns",
            "max_observation_tokens",
            "max_actions",
            "max_skills",
            "max_skill_chars",
            "min_skills",
            "short_skill_chars",
        ):
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


def build_prompt(
    state: AgentState,
    config: PromptConfig,
    count: CountTokens,
    adapter: PromptText | None = None,
) -> BuiltPrompt:
    """Build the prompt for ``state`` within ``config.max_prompt_tokens``.

    ``adapter``: the environment's (default: the one registered for ``state.env_id``).
    """
    adapter = adapter if adapter is not None else envs.adapter_for(state.env_id)
    skills = _capped(state.skills.all, config.max_skills) if state.skills is not None else []
    history = state.history[-config.history_turns :] if config.history_turns else []
    cleaned = adapter.clean_observation(state.observation, state.instruction)
    observation = _cut_tokens(cleaned, config.max_observation_tokens, count)
    system = adapter.system_prompt()
    reply_format = adapter.format_text(config.think)
    actions = adapter.actions_text(state.available_actions, config.max_actions)
    fixed = {
        "system": count(system),
        "format": count(reply_format),
        "task": count(_task_text(state)),
        "actions": count(actions),
    }
    skill_chars = config.max_skill_chars
    while True:
        parts = dict(fixed)
        parts["skills"] = (
            count(_skills_text(skills, skill_chars, config.skill_form)) if skills else 0
        )
        parts["history"] = count(_history_text(history)) if history else 0
        parts["observation"] = count(observation)
        excess = sum(parts.values()) - config.max_prompt_tokens
        if excess <= 0:
            break
        if len(skills) > config.min_skills:
            skills = _drop_one_skill(skills)
        elif skills and skill_chars > config.short_skill_chars:
            skill_chars = config.short_skill_chars
        elif history:
            history = history[1:]
        elif parts["observation"] > 0:
            observation = _cut_tokens(observation, max(parts["observation"] - excess, 0), count)
        elif skills:  # nothing else is left to cut: the page's fixed parts fill the budget
            skills = _drop_one_skill(skills)
        else:
            break
    sections = [_task_text(state)]
    if skills:
        sections.append(_skills_text(skills, skill_chars, config.skill_form))
    if history:
        sections.append(_history_text(history))
    # A multi-line observation (a grid, a rich page) starts on its own line, rows intact.
    separator = "\n" if "\n" in observation else " "
    sections.append(f"Observation:{separator}{observation}")
    sections.append(actions)
    messages = [
        {"role": "system", "content": f"{system}\n\n{reply_format}"},
        {"role": "user", "content": "\n\n".join(sections)},
    ]
    counts = {name: parts.get(name, 0) for name in PARTS}
    return BuiltPrompt(messages, counts, [r.entry.id for r in skills], len(history))


KEEP_ORDER: tuple[str, ...] = ("case", "task", "mistake", "general")
"""Which kind's best entry a capped prompt keeps first: what differs from goal to goal first (a
case names what solved a similar request: the one entry the page cannot stand in for)."""


def _capped(skills: list[RetrievedEntry], limit: int) -> list[RetrievedEntry]:
    """Return at most ``limit`` entries (0: all), kept in retrieval order.

    The best of each kind in :data:`KEEP_ORDER` first, then the next best of each, and so on.
    """
    if not limit or len(skills) <= limit:
        return list(skills)
    by_kind = {
        kind: [i for i, r in enumerate(skills) if r.entry.kind == kind] for kind in KEEP_ORDER
    }
    others = [i for i, r in enumerate(skills) if r.entry.kind not in KEEP_ORDER]
    kept: list[int] = []
    rank = 0
    while len(kept) < limit:
        round_ = [by_kind[k][rank] for k in KEEP_ORDER if rank < len(by_kind[k])]
        if not round_:
            break
        kept.extend(round_[: limit - len(kept)])
        rank += 1
    kept.extend(others[: limit - len(kept)])
    return [skills[i] for i in sorted(kept)]


def _drop_one_skill(skills: list[RetrievedEntry]) -> list[RetrievedEntry]:
    """Drop the least valuable entry: notes first, then task skills, general ones, cases last."""
    for kind in ("mistake", "task", "general", "case"):
        for i in range(len(skills) - 1, -1, -1):
            if skills[i].entry.kind == kind:
                return skills[:i] + skills[i + 1 :]
    return skills[:-1]


def _task_text(state: AgentState) -> str:
    return f"Task: {state.instruction}"


def _skills_text(skills: list[RetrievedEntry], max_chars: int, form: str) -> str:
    labels = {"general": "tip", "task": "tip", "mistake": "avoid", "case": "case"}
    lines = ["Skills:"]
    for retrieved in skills:
        entry = retrieved.entry
        body = entry.principle
        if entry.kind == "mistake" and entry.correction:
            body = f"{entry.principle} Instead: {entry.correction}"
        full = f"{entry.title}: {body}" if form == "full" or not entry.title else entry.title
        # One line per entry, whatever its text: a line break in an entry cannot open what
        # reads as a new section of the prompt ("Task:", "Recent actions:").
        text = " ".join(full.split())[:max_chars]
        lines.append(f"- ({labels.get(entry.kind, entry.kind)}) {text}")
    return "\n".join(lines)


def _history_text(history: list) -> str:
    lines = ["Recent actions:"]
    for turn in history:
        flag = "" if turn.action_valid else " (invalid, nothing happened)"
        lines.append(f"- {turn.action}{flag}")
    return "\n".join(lines)


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


def fixed_prompt_tokens(
    adapter: PromptText, config: PromptConfig, count: CountTokens = estimate_tokens
) -> int:
    """Tokens of what every prompt of ``adapter``'s environment holds: system message and format.

    :func:`build_prompt` shrinks the skills, the history and the observation to fit the budget,
    never these, so a ``max_prompt_tokens`` below this cannot hold a prompt.
    """
    return count(adapter.system_prompt()) + count(adapter.format_text(config.think))
