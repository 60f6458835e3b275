"""The analytic distiller: skills and notes from trajectory structure, no teacher model.

Every lesson comes from the episode's environment through its distill adapter
(:mod:`envs.distill_adapter`): successes become task skills that state the decisive steps as a
pattern, with the episode's specifics left out; a pattern that recurs in successes of at least
``min_categories_for_general`` categories of one environment also becomes a general skill.
Failures become counterfactual notes (:mod:`skillrl.distill.notes`). Identical drafts from
several episodes are folded into one draft that lists all of them, so the bank sees each
pattern once per pass.

With the 135M default policy as the only local model, this is what keeps the improvement loop
working offline; :class:`~skillrl.distill.teacher.TeacherDistiller` is for users with a strong
model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from envs import distill_adapter_for
from memory.types import EntryDraft
from skillrl.distill.notes import failure_notes, lesson_draft
from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord
from skillrl_core.validation import check_finite_fields


@dataclass
class AnalyticConfig:
    """Settings of the analytic distiller."""

    max_notes_per_failure: int = 3
    """At most this many counterfactual notes from one failed episode."""
    min_categories_for_general: int = 2
    """A success pattern seen in this many categories in one pass also becomes a general skill."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.max_notes_per_failure < 1:
            raise ConfigError(f"max_notes_per_failure ({self.max_notes_per_failure}) must be >= 1")
        if self.min_categories_for_general < 2:
            raise ConfigError(
                f"min_categories_for_general ({self.min_categories_for_general}) must be >= 2"
            )


def success_skill(episode: EpisodeRecord) -> tuple[EntryDraft, str]:
    """Return the task skill of one successful episode and the key of its general pattern."""
    found = distill_adapter_for(episode.env_id).success_lesson(episode)
    draft = lesson_draft(episode, found.lesson, "task", f"successful episode in {episode.category}")
    return draft, found.pattern


def general_skill(
    env_id: str, pattern: str, categories: list[str], episode_ids: list[str]
) -> EntryDraft:
    """Return the principle shared by successes across categories, stated for any task."""
    lesson = distill_adapter_for(env_id).general_lesson(pattern)
    return EntryDraft(
        kind="general",
        title=lesson.title,
        principle=lesson.principle,
        when_to_apply=lesson.when_to_apply,
        source="distiller:analytic",
        trajectory_ids=episode_ids,
        reason=f"success pattern in {len(categories)} categories: {', '.join(categories)}",
    )


def lesson_key(draft: EntryDraft) -> tuple[str, ...]:
    """Identity of an analytic lesson: a note's title names its lesson; skills need equal text."""
    text = draft.title if draft.kind == "mistake" else draft.text_for_embedding()
    return (draft.kind, draft.env or "", draft.category or "", text)


def fold_duplicates(
    drafts: list[EntryDraft], key: Callable[[EntryDraft], tuple[str, ...]] | None = None
) -> list[EntryDraft]:
    """Merge drafts with the same key (default: identical text), keeping every source episode.

    The first draft of a key is kept as written (a note keeps its first episode's precise
    failure point) and gains the other drafts' trajectory ids.
    """
    folded: dict[tuple[str, ...], EntryDraft] = {}
    for draft in drafts:
        key_of = key(draft) if key else (draft.kind, draft.env or "", draft.category or "",
                                         draft.text_for_embedding())  # fmt: skip
        if key_of in folded:
            kept = folded[key_of]
            kept.trajectory_ids = list(dict.fromkeys(kept.trajectory_ids + draft.trajectory_ids))
        else:
            folded[key_of] = draft
    return list(folded.values())


class AnalyticDistiller:
    """Distills without a teacher, from trajectory structure and the reward breakdown."""

    name = "analytic"

    def __init__(self, config: AnalyticConfig | None = None) -> None:
        self.config = config or AnalyticConfig()

    def distill(self, episodes: list[EpisodeRecord]) -> list[EntryDraft]:
        """Return task skills (successes), general skills (recurring patterns), notes (failures)."""
        drafts: list[EntryDraft] = []
        patterns: dict[tuple[str, str], dict[str, list[str]]] = {}
        for episode in episodes:
            if not episode.turns:
                continue
            if episode.success:
                skill, pattern = success_skill(episode)
                drafts.append(skill)
                by_category = patterns.setdefault((episode.env_id, pattern), {})
                by_category.setdefault(episode.category, []).append(episode.episode_id)
            else:
                drafts += failure_notes(episode, self.config.max_notes_per_failure)
        for (env_id, pattern), by_category in patterns.items():
            if len(by_category) >= self.config.min_categories_for_general:
                ids = [i for episode_ids in by_category.values() for i in episode_ids]
                drafts.append(general_skill(env_id, pattern, sorted(by_category), ids))
        folded = fold_duplicates(drafts, key=lesson_key)
        for draft in folded:
            if draft.kind == "mistake" and len(draft.trajectory_ids) > 1:
                draft.reason = f"{len(draft.trajectory_ids)} failed episodes in {draft.category}"
        return folded
