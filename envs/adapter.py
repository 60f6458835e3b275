"""``AgentAdapter``: everything the agent runtime needs to know about one environment.

The runtime (prompts, parsing, agents, rollouts, the trainer's runner, ``skillrl run``) knows
no environment: it asks the adapter in the environment's :class:`~envs.spec.EnvSpec`
(:func:`envs.adapter_for`). The contract is cut by who uses it, five small protocols that one
adapter object implements together:

- :class:`PromptText` (the prompt builder): the system prompt (the role and the action grammar;
  it never changes within an environment, so it leads the prompt and a KV cache can share it),
  the reply format, how one observation is cleaned for a prompt (e.g. the task it repeats
  removed) and how the admissible actions are listed;
- :class:`ActionGrammar` (the parser and constrained decoding): how the action is read from the
  text inside the generic ``<think>..</think><action>..</action>`` envelope (which stays in
  :mod:`skillrl.parsing`) and whether it is admissible; whether a turn is a free-text turn (the
  model writes text after a prefix, e.g. WebShop's search query after ``search[``), how that
  text becomes an action and when it is repaired, and otherwise the candidates scored;
- :class:`EpisodeRules` (rollouts, evaluation, the trainers' goal counts): the episode score
  (always in [0, 1]) and success, split sizes, task categories;
- :class:`ExpertSource` (the expert agent, the cold start): a scripted expert when the
  environment has one, and a short reason for an expert action (cold-start examples that think
  before acting);
- :class:`HumanPlay` (``skillrl run --policy human``): how a person's typed shorthand becomes an
  action, how actions are shown, and the environment settings a person plays under.

:class:`ActionListAdapter` implements all five for environments whose every action is one of a
listed set of strings (Sokoban's four moves, a toy environment), so such an environment writes
no adapter method; an environment with richer actions (WebShop) writes its own. An environment
registered without an adapter gets a plain :class:`ActionListAdapter`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class ActionRead:
    """An action read from a model's (or a person's) text."""

    action: str
    """The normalised action (or the raw text when it is not admissible)."""
    ok: bool
    """Whether the action is admissible now."""
    error: str = ""
    """Why it is not (empty when ok)."""


@runtime_checkable
class Expert(Protocol):
    """A scripted player of one episode at a time, seeing what an agent sees."""

    def reset(self, reset_info: dict[str, Any]) -> None:
        """Start an episode from the environment's reset info."""
        ...

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """Return the next action for ``observation`` (``info`` carries the admissible ones)."""
        ...


@runtime_checkable
class PromptText(Protocol):
    """What the prompt builder asks of an environment: its role, reply format, page, action list."""

    def system_prompt(self) -> str:
        """Return the agent's role and the action grammar (the same every turn of every episode)."""
        ...

    def format_text(self, think: bool) -> str:
        """How to reply (``think``: ask for a ``<think>`` section first); the same every turn."""
        ...

    def clean_observation(self, observation: str, instruction: str) -> str:
        """Return the observation as the prompt shows it (e.g. without the task it repeats)."""
        ...

    def actions_text(self, available_actions: Sequence[str], max_actions: int) -> str:
        """Return the admissible actions as the prompt lists them (at most ``max_actions``)."""
        ...


@runtime_checkable
class ActionGrammar(Protocol):
    """How a reply becomes an action: the parser's reading and constrained decoding's choices."""

    def read_action(self, text: str, available_actions: Sequence[str]) -> ActionRead | None:
        """Return the first action of this environment's grammar in ``text``; None if none.

        ``text`` is what the envelope left (the ``<action>`` content, or the reply outside any
        ``<think>``). A pure function: linear time on any input, never raises.
        """
        ...

    def is_free_text_turn(self, available_actions: Sequence[str]) -> bool:
        """Whether the model writes free text this turn (else it picks among candidates)."""
        ...

    def free_text_prefix(self) -> str:
        """Return what a free-text reply starts with, after ``<action>`` (e.g. ``search[``)."""
        ...

    def free_text_stop(self) -> str:
        """Return the text that ends the free text (e.g. ``]``)."""
        ...

    def free_text_action(self, written: str, instruction: str, repair: bool) -> tuple[str, bool]:
        """Turn the written free text into an action; ``(action, repaired)``.

        ``repair``: replace text that cannot work (e.g. a query with no word of the task) and
        say so, so the trainer leaves the turn out of the loss.
        """
        ...

    def candidates(self, available_actions: Sequence[str]) -> list[str]:
        """Return the actions scored on a candidate turn (in order; the choice is one of them)."""
        ...


@runtime_checkable
class EpisodeRules(Protocol):
    """How an episode is judged and which goals exist: rollouts, evaluation, the trainers."""

    def episode_score(self, reward: float, terminated: bool, info: Mapping[str, Any]) -> float:
        """Return the episode's score in [0, 1] from its last step's reward, end and info."""
        ...

    def episode_success(self, info: Mapping[str, Any]) -> bool:
        """Whether the episode ending with ``info`` solved its task."""
        ...

    def split_size(self, split: str, env_config: Mapping[str, Any]) -> int:
        """Goals in ``split`` for the environment built with ``env_config``."""
        ...

    def categories(self, env_config: Mapping[str, Any]) -> list[str]:
        """Return the task categories (``info["category"]`` values) of the environment."""
        ...

    def wanted_values(self, instruction: str) -> tuple[str, ...]:
        """Return what ``instruction`` asks its solution to come in, lowercased.

        WebShop: the option values it names; empty when it names none. Retrieval matches them
        against a case's offers: of the cases of one request, it serves first the one whose
        solution comes in all of them (``memory.types.RetrievalQuery``).
        """
        ...


@runtime_checkable
class ExpertSource(Protocol):
    """The scripted expert and its reasons: the expert agent and the cold start's examples."""

    def make_expert(self, max_turns: int) -> Expert | None:
        """Return a scripted expert for one episode, or None when the environment has none.

        An expert that also has ``decide(observation, info) -> str`` and ``observe(action)`` can
        label states it did not reach itself (DAgger); without them ``act`` labels.
        """
        ...

    def action_thought(self, action: str) -> str:
        """Return a short reason for an expert's ``action`` (cold-start examples think first)."""
        ...


@runtime_checkable
class HumanPlay(Protocol):
    """How a person plays in ``skillrl run --policy human``: shorthand, the list shown, help."""

    def expand_typed(self, typed: str, available_actions: Sequence[str]) -> str:
        """Return a person's shorthand (a number, a word) as an action string."""
        ...

    def wants_free_text(self, typed: str, available_actions: Sequence[str]) -> bool:
        """Whether the person picked the free-text box itself, so their words must be asked."""
        ...

    def present_actions(
        self, observation: str, available_actions: Sequence[str]
    ) -> list[tuple[str, str]]:
        """``(label, hint)`` per admissible action, in order, for a person's numbered list."""
        ...

    def play_help(self, available_actions: Sequence[str]) -> str:
        """One line telling a person what they may type this turn."""
        ...

    def human_env_options(self) -> Mapping[str, Any]:
        """Environment settings a person plays under unless told otherwise (a readable page)."""
        ...


@runtime_checkable
class AgentAdapter(PromptText, ActionGrammar, EpisodeRules, ExpertSource, HumanPlay, Protocol):
    """The agent-facing contract of one environment: the five parts above, one object.

    Each consumer names the part it uses (the prompt builder a :class:`PromptText`, the parser
    an :class:`ActionGrammar`, ...), so a reader sees which methods a change can reach.
    :class:`ActionListAdapter` implements all of them; a new environment with listed actions
    implements none (see docs/environments.md).
    """


class ActionListAdapter:
    """An adapter for environments whose actions are a listed set of strings.

    Reading matches an admissible action as a whole word, in any letter case; there are no
    free-text turns; candidates are the admissible actions; the score is 1.0 on success and
    0.0 otherwise (override :meth:`episode_score` for partial credit). Subclass it and override
    what differs; everything here is plain and pure.
    """

    def __init__(
        self,
        system_prompt: str = "You are an agent in a text environment. Complete the task.",
        *,
        example_action: str = "...",
        split_sizes: Mapping[str, int] | None = None,
        categories: Sequence[str] = (),
        expert: Callable[[int], Expert] | None = None,
    ) -> None:
        self._system_prompt = system_prompt
        self.example_action = example_action
        self._split_sizes = dict(split_sizes or {})
        self._categories = list(categories)
        self._expert = expert
        """A factory of an :class:`Expert` for ``max_turns``, or None."""

    def system_prompt(self) -> str:
        """Return the role given at construction."""
        return self._system_prompt

    def format_text(self, think: bool) -> str:
        """Ask for one admissible action in the ``<action>`` envelope."""
        if think:
            return (
                "Reply with a short thought and exactly one admissible action, like:\n"
                f"<think>reason</think><action>{self.example_action}</action>"
            )
        example = f"<action>{self.example_action}</action>"
        return f"Reply with exactly one admissible action, like:\n{example}"

    def clean_observation(self, observation: str, instruction: str) -> str:
        """Return the observation, stripped of surrounding whitespace."""
        return observation.strip()

    def actions_text(self, available_actions: Sequence[str], max_actions: int) -> str:
        """``Actions: a, b, c (+n more)``."""
        shown = list(available_actions[:max_actions])
        more = len(available_actions) - len(shown)
        return "Actions: " + ", ".join(shown) + (f" (+{more} more)" if more > 0 else "")

    def read_action(self, text: str, available_actions: Sequence[str]) -> ActionRead | None:
        """Return the admissible action named earliest in ``text`` (whole words, any case)."""
        lowered = text.lower()
        best: tuple[int, str] | None = None
        for action in available_actions:
            position = _find_word(lowered, action.lower())
            if position >= 0 and (best is None or position < best[0]):
                best = (position, action)
        if best is None:
            return None
        return ActionRead(best[1], True)

    def is_free_text_turn(self, available_actions: Sequence[str]) -> bool:
        """Never: every action is listed."""
        return False

    def free_text_prefix(self) -> str:
        """Unused (no free-text turns)."""
        return ""

    def free_text_stop(self) -> str:
        """Unused (no free-text turns)."""
        return "</action>"

    def free_text_action(self, written: str, instruction: str, repair: bool) -> tuple[str, bool]:
        """Return the written text, as it is."""
        return " ".join(written.split()), False

    def candidates(self, available_actions: Sequence[str]) -> list[str]:
        """Return the admissible actions."""
        return list(available_actions)

    def episode_score(self, reward: float, terminated: bool, info: Mapping[str, Any]) -> float:
        """1.0 on success, else 0.0."""
        return 1.0 if self.episode_success(info) else 0.0

    def episode_success(self, info: Mapping[str, Any]) -> bool:
        """``info["success"]``."""
        return bool(info.get("success", False))

    def split_size(self, split: str, env_config: Mapping[str, Any]) -> int:
        """Return the size given at construction; open-ended (a million) when none was."""
        return self._split_sizes.get(split, 1_000_000)

    def categories(self, env_config: Mapping[str, Any]) -> list[str]:
        """Return the categories given at construction."""
        return list(self._categories)

    def wanted_values(self, instruction: str) -> tuple[str, ...]:
        """Return nothing: a listed-action environment names no options in its instructions."""
        return ()

    def make_expert(self, max_turns: int) -> Expert | None:
        """Return the expert factory's expert for ``max_turns``, or None without a factory."""
        return None if self._expert is None else self._expert(max_turns)

    def action_thought(self, action: str) -> str:
        """Return a generic reason: the action moves towards the task."""
        return f"{action} brings the task closer to done."

    def expand_typed(self, typed: str, available_actions: Sequence[str]) -> str:
        """Pick the numbered action for a number; take anything else as typed."""
        text = typed.strip()
        if text.isdigit() and 1 <= int(text) <= len(available_actions):
            return available_actions[int(text) - 1]
        return text

    def wants_free_text(self, typed: str, available_actions: Sequence[str]) -> bool:
        """Never: there is no free-text box."""
        return False

    def present_actions(
        self, observation: str, available_actions: Sequence[str]
    ) -> list[tuple[str, str]]:
        """Each action as its own label, without hints."""
        return [(action, "") for action in available_actions]

    def play_help(self, available_actions: Sequence[str]) -> str:
        """Numbers or the action's words."""
        return "type a number or an action from the list; q quits"

    def human_env_options(self) -> Mapping[str, Any]:
        """None: a person sees the pages the model sees."""
        return {}


def _find_word(text: str, word: str) -> int:
    """Position of ``word`` in ``text`` standing alone (no letter or digit either side), or -1."""
    if not word:
        return -1
    start = text.find(word)
    while start >= 0:
        end = start + len(word)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not before.isalnum() and not after.isalnum():
            return start
        start = text.find(word, start + 1)
    return -1
