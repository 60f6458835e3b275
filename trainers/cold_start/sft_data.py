"""Turn examples for supervised fine-tuning: the run-time prompt of a turn and its target action.

A :class:`TurnExample` pairs the prompt the agent sends at one turn with the completion that
should follow it. The prompt is built by the agent itself (``LLMAgent.prompt_for``, i.e.
``skillrl.prompts.build_prompt`` with the agent's token counter and budget) from the
:class:`~skillrl.agents.base.AgentState` the rollout engine hands it, so an example is exactly
what the policy sees at run time: task, the skills retrieved at that turn, history window,
observation, admissible actions. The target is in the policy's own output format:

- constrained decoding: the agent pre-fills the assistant turn (``<action>`` plus, on a free-text
  turn, the environment adapter's prefix: WebShop's ``<action>search[``) and the model writes the
  free text up to its stop (``]``) or is scored on ``<candidate></action>``; the pre-filled part
  is :attr:`TurnExample.assistant_prefix` (prompt, no loss) and the rest is the target;
- free decoding: ``<think>short thought</think><action>...</action>``, all of it the target.

:func:`tokenize_example` turns an example into ``input_ids`` + ``completion_mask`` with the same
rendering the policy uses (``render_chat_ids``), so the trained prompt tokens are the run-time
prompt tokens. Datasets are JSONL files that ``datasets.load_dataset("json", ...)`` reads
(conversational ``prompt`` / ``completion`` plus metadata columns), written atomically.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import envs
from skillrl.agents.base import AgentState
from skillrl.agents.llm import ACTION_PREFIX, LLMAgent
from skillrl.policies.base import Conversation, render_chat_ids
from skillrl_core.errors import DataFileError
from skillrl_core.files import atomic_write_text


@dataclass
class TurnExample:
    """One supervised example: a turn's run-time prompt and the completion to learn."""

    prompt: Conversation
    """System and user messages exactly as the agent builds them for that turn."""
    completion: Conversation
    """One assistant message: :attr:`assistant_prefix` followed by the target text."""
    assistant_prefix: str
    """The part of the assistant message the agent pre-fills at run time (no loss on it)."""
    action: str
    """The labelled action (also inside the completion)."""
    source: str
    """``expert``, ``bank``, ``teacher`` or ``dagger``."""
    round: int
    """Cold-start round that produced it (0: behaviour cloning)."""
    split: str
    goal_id: str
    goal_index: int
    episode: int
    """Position of the episode in its round and source (several may share a goal)."""
    turn: int
    learner_action: str = ""
    """DAgger: the action the policy took at this state (empty for demonstrations)."""
    skill_ids: list[str] = field(default_factory=list)
    """Retrieved entries that made it into the prompt."""

    @property
    def target(self) -> str:
        """The trained text: the completion after the pre-filled prefix."""
        return self.completion[0]["content"][len(self.assistant_prefix) :]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able row."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnExample:
        """Rebuild an example from :meth:`to_dict` output."""
        return cls(**data)


def action_target(
    action: str, state: AgentState, *, constrained: bool, thought: str = ""
) -> tuple[str, str]:
    """Return ``(assistant_prefix, target)`` for ``action`` at ``state`` in the policy's format."""
    adapter = envs.adapter_for(state.env_id)
    if constrained:
        free = adapter.free_text_prefix()
        if free and adapter.is_free_text_turn(state.available_actions) and action.startswith(free):
            # The model writes the free text after the prefix and stops at the adapter's stop.
            return ACTION_PREFIX + free, action[len(free) :]
        return ACTION_PREFIX, f"{action}</action>"
    thought = thought or expert_thought(action, state.env_id)
    return "", f"<think>{thought}</think><action>{action}</action>"


def expert_thought(action: str, env_id: str) -> str:
    """Return a short reason for an expert action (free decoding asks for a thought first)."""
    return envs.adapter_for(env_id).action_thought(action)


def build_example(
    prompt_agent: LLMAgent,
    state: AgentState,
    action: str,
    *,
    constrained: bool,
    source: str,
    round_index: int,
    episode: int,
    goal_index: int,
    split: str,
    thought: str = "",
    learner_action: str = "",
) -> TurnExample:
    """Build the example for ``state`` with the prompt ``prompt_agent`` sends at run time."""
    built = prompt_agent.prompt_for(state)
    prefix, target = action_target(action, state, constrained=constrained, thought=thought)
    return TurnExample(
        prompt=[dict(m) for m in built.messages],
        completion=[{"role": "assistant", "content": prefix + target}],
        assistant_prefix=prefix,
        action=action,
        source=source,
        round=round_index,
        split=split,
        goal_id=str(state.info.get("goal_id", "")),
        goal_index=goal_index,
        episode=episode,
        turn=state.turn,
        learner_action=learner_action,
        skill_ids=list(built.skill_ids),
    )


def prompt_conversation(example: TurnExample) -> Conversation:
    """Return the conversation the policy continues at run time (pre-filled prefix included)."""
    if not example.assistant_prefix:
        return [dict(m) for m in example.prompt]
    return [*example.prompt, {"role": "assistant", "content": example.assistant_prefix}]


def tokenize_example(tokenizer: Any, example: TurnExample) -> dict[str, list[int]]:
    """Token ids of prompt + target and the mask of target tokens (1) vs prompt tokens (0).

    The prompt is rendered as the policy renders it (``render_chat_ids``); the target is
    tokenized on its own, as the constrained agent scores a candidate click, so prompt tokens
    are the run-time prompt tokens exactly. No end-of-turn token is added: at run time
    generation stops at ``</action>`` (free) or ``]`` (query), and clicks are only scored.
    """
    prompt_ids = render_chat_ids(tokenizer, prompt_conversation(example))
    target_ids = tokenizer.encode(example.target, add_special_tokens=False)
    return {
        "input_ids": prompt_ids + target_ids,
        "completion_mask": [0] * len(prompt_ids) + [1] * len(target_ids),
    }


def write_examples(path: Path, examples: list[TurnExample]) -> None:
    """Write ``examples`` as JSONL (one row each), atomically."""
    lines = [json.dumps(e.to_dict(), sort_keys=True) for e in examples]
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))


def read_examples(path: Path) -> list[TurnExample]:
    """Read what :func:`write_examples` wrote (DataFileError when unreadable)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        return [TurnExample.from_dict(json.loads(line)) for line in lines if line.strip()]
    except (OSError, json.JSONDecodeError, TypeError) as error:
        raise DataFileError(f"cannot read fine-tuning examples from {path}: {error}") from error
