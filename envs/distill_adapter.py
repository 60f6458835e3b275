"""What the distiller may know about an environment: the :class:`DistillAdapter` protocol.

The distiller (``skillrl/distill/``) turns finished episodes into skills and counterfactual notes
without knowing any environment. Everything it needs that only the environment knows sits
behind this protocol, one implementation per environment (``envs/<name>/distill.py``),
registered with ``envs.register(..., distill_adapter=...)`` and found with
``envs.distill_adapter_for(env_id)``:

- ``outcome(episode)``: the episode's ``reward_breakdown`` (JSON-able, as stored on the record)
  parsed into the environment's typed record, whose ``explain()`` says why reward was lost;
- ``failure_lessons`` / ``success_lesson`` / ``general_lesson``: the lessons an episode teaches,
  as :class:`Lesson` objects (a note's failure point, flawed action, correction and principle);
- ``leak_patterns`` and ``episode_leaks``: what counts as leaking one episode's specifics;
  ``specifics_rule`` says the same to a teacher model;
- ``summarise_actions``: the trajectory's steps, told for a teacher prompt;
- ``case_lesson``: the case a solved episode leaves (what solved its request), for environments
  whose goals recur across splits;
- ``categories`` and ``category_label``: the task categories;
- ``faults`` and ``spoil``: deliberate mistakes a scripted expert can make (``skillrl
  bootstrap`` probes), for environments that have them.

:class:`PlainDistillAdapter` is the base both built-in adapters extend and the one an
environment registered without an adapter gets: it knows only what every trajectory shows
(invalid actions, repeated actions, the turn budget).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from skillrl_core.records import EpisodeRecord


@dataclass(frozen=True)
class Lesson:
    """One lesson in the environment's words; the distiller files it as a bank entry."""

    title: str
    principle: str
    when_to_apply: str = ""
    failure_point: str = ""
    """Notes only: where this episode went wrong (may name values the goal asked for)."""
    flawed_action: str = ""
    correction: str = ""
    offers: tuple[str, ...] = ()
    """Cases only: what the solution was seen to come in (WebShop: the options its product's
    page listed)."""


@dataclass(frozen=True)
class SuccessLesson:
    """The task skill a successful episode teaches and the key of the pattern behind it."""

    lesson: Lesson
    pattern: str
    """Successes with the same pattern in several categories make one general skill."""


@dataclass(frozen=True)
class LeakPattern:
    """Text matching ``pattern`` names what only one episode knew (reason: ``contains <what>``)."""

    pattern: re.Pattern[str]
    what: str


@runtime_checkable
class Outcome(Protocol):
    """An environment's typed reward breakdown."""

    def explain(self) -> str:
        """Say, without ids or amounts a reader could copy, why the episode scored as it did."""
        ...


@runtime_checkable
class DistillAdapter(Protocol):
    """The whole of what the distiller knows about one environment."""

    env_id: str
    categories: tuple[str, ...]
    leak_patterns: tuple[LeakPattern, ...]
    specifics_rule: str
    """One sentence for a teacher: what a lesson must never contain in this environment."""
    faults: tuple[str, ...]

    def outcome(self, episode: EpisodeRecord) -> Outcome | None:
        """Return the episode's typed breakdown (None when it has none)."""
        ...

    def explain(self, episode: EpisodeRecord) -> str:
        """Return the judge's findings as lines for a teacher prompt."""
        ...

    def summarise_actions(self, episode: EpisodeRecord) -> str:
        """Return the episode's steps as lines for a teacher prompt."""
        ...

    def failure_lessons(self, episode: EpisodeRecord) -> list[Lesson]:
        """Return the counterfactual notes of a failed episode, most decisive first."""
        ...

    def success_lesson(self, episode: EpisodeRecord) -> SuccessLesson:
        """Return the task skill of a successful episode."""
        ...

    def general_lesson(self, pattern: str) -> Lesson:
        """Return the general skill behind a success ``pattern`` seen in several categories."""
        ...

    def episode_leaks(self, text: str, episode: EpisodeRecord) -> list[str]:
        """Return why ``text`` names specifics of ``episode`` beyond :attr:`leak_patterns`."""
        ...

    def case_lesson(self, episode: EpisodeRecord) -> Lesson | None:
        """Return the case a solved ``episode`` leaves (None: this environment keeps no cases).

        A case is specific on purpose: ``when_to_apply`` holds the request it is retrieved by,
        ``title`` the line a prompt shows (the decisive action, written as the agent writes it).
        """
        ...

    def category_label(self, category: str) -> str:
        """Return ``category`` as words for a title."""
        ...

    def spoil(self, fault: str, action: str, available: list[str], spoiled: bool) -> str | None:
        """Return the mistaken replacement of an expert's ``action`` (None: keep it)."""
        ...


def words(text: str) -> list[str]:
    """Lowercased alphanumeric words of ``text`` (what the leak checks compare)."""
    return re.findall(r"[a-z0-9]+", text.lower())


def has_span(haystack: list[str], needle: list[str], size: int) -> bool:
    """Whether ``haystack`` contains ``size`` consecutive words of ``needle``."""
    if len(needle) < size:
        return False
    joined = " " + " ".join(haystack) + " "
    return any(
        " " + " ".join(needle[i : i + size]) + " " in joined for i in range(len(needle) - size + 1)
    )


class PlainDistillAdapter:
    """An environment the distiller knows only through its trajectories.

    Subclasses override what their environment knows more about; the loop and invalid-action
    lessons here serve every environment.
    """

    env_id = ""
    categories: tuple[str, ...] = ()
    leak_patterns: tuple[LeakPattern, ...] = ()
    specifics_rule = "never copy ids, numbers or long quotes that belong to this one task."
    faults: tuple[str, ...] = ()

    def __init__(self, env_id: str = "") -> None:
        if env_id:
            self.env_id = env_id

    def outcome(self, episode: EpisodeRecord) -> Outcome | None:
        """Return None: no typed breakdown is known."""
        return None

    def explain(self, episode: EpisodeRecord) -> str:
        """Return the outcome's explanation, else the score."""
        outcome = self.outcome(episode)
        if outcome is not None:
            return outcome.explain()
        result = "solved" if episode.success else "not solved"
        return f"- the task was {result} (score {episode.score:g})"

    def summarise_actions(self, episode: EpisodeRecord) -> str:
        """List the actions, marking the invalid ones."""
        return "\n".join(
            f"{t.turn}. {t.action}" + ("" if t.action_valid else " (invalid)")
            for t in episode.turns
        )

    def describe_action(self, action: str) -> str:
        """Name an action in a note (subclasses strip what is episode specific)."""
        return action

    def failure_lessons(self, episode: EpisodeRecord) -> list[Lesson]:
        """Explain a failure from the trajectory alone."""
        lesson = self.invalid_actions_lesson(episode) or self.loop_lesson(episode)
        return [lesson] if lesson else []

    def success_lesson(self, episode: EpisodeRecord) -> SuccessLesson:
        """Return a task skill that knows nothing of the environment."""
        label = self.category_label(episode.category)
        return SuccessLesson(
            Lesson(
                title=f"{label}: act only with admissible actions and finish",
                principle=(
                    "Choose each action from the admissible ones, make progress toward the goal "
                    "every turn, and finish as soon as the goal is met."
                ),
                when_to_apply=f"Any {label} task.",
            ),
            "plain",
        )

    def general_lesson(self, pattern: str) -> Lesson:
        """Return the principle every environment shares."""
        return Lesson(
            title="Make progress every turn, then finish",
            principle=(
                "Pick each action for the progress it makes toward the goal, never repeat an "
                "action that changed nothing, and finish as soon as the goal is met."
            ),
            when_to_apply="Any multi-step task with a turn budget.",
        )

    def episode_leaks(self, text: str, episode: EpisodeRecord) -> list[str]:
        """Return no reasons: nothing beyond the generic checks is known."""
        return []

    def case_lesson(self, episode: EpisodeRecord) -> Lesson | None:
        """Return None: an environment keeps no cases unless it says what solved a request."""
        return None

    def category_label(self, category: str) -> str:
        """Return ``category`` with spaces for underscores, first letter capitalised."""
        text = category.replace("_", " ")
        return text[:1].upper() + text[1:]

    def spoil(self, fault: str, action: str, available: list[str], spoiled: bool) -> str | None:
        """Return None: without faults every action is kept."""
        return None

    # -- lessons every environment shares ----------------------------------------------------
    def invalid_actions_lesson(self, episode: EpisodeRecord) -> Lesson | None:
        """Return a note when at least half of the actions were not admissible (else None)."""
        turns, invalid = len(episode.turns), episode.invalid_actions
        if not turns or invalid * 2 < turns:
            return None
        return Lesson(
            title="Use only admissible actions",
            principle=(
                "Copy one action exactly from the list of available actions each turn; "
                "anything else is a wasted turn."
            ),
            when_to_apply="Every turn, before writing the action.",
            failure_point=f"used all {turns} turns without completing the task",
            flawed_action=f"{invalid} of {turns} actions were not admissible",
            correction="pick the next action from the available actions, written exactly",
        )

    def loop_lesson(self, episode: EpisodeRecord) -> Lesson | None:
        """Return a note when a valid action was repeated three times or more (else None)."""
        action, times = most_repeated(episode)
        if times < 3:
            return None
        return Lesson(
            title="Break loops and commit within the turn budget",
            principle=(
                "Never repeat an action that did not bring the goal closer; change approach "
                "after two tries that changed nothing."
            ),
            when_to_apply="When the same action comes up a third time.",
            failure_point=f"used all {len(episode.turns)} turns without completing the task",
            flawed_action=f"repeated {self.describe_action(action)} {times} times",
            correction="try a different action that moves toward the goal",
        )


def most_repeated(episode: EpisodeRecord) -> tuple[str, int]:
    """Return the valid action repeated most often (lowercased) and how many times."""
    counts = Counter(t.action.strip().lower() for t in episode.turns if t.action_valid)
    return counts.most_common(1)[0] if counts else ("", 0)
