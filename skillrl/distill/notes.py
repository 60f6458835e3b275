"""Counterfactual notes from failed episodes, in the words of their environment.

The environment's distill adapter names each cause of lost reward it can read from the episode
(:meth:`~envs.distill_adapter.DistillAdapter.failure_lessons`): where it went wrong, the flawed
action, what to do instead and the principle. This module files each as a ``mistake`` draft.
"""

from __future__ import annotations

from envs import distill_adapter_for
from envs.distill_adapter import Lesson
from memory.types import EntryDraft
from skillrl_core.records import EpisodeRecord


def lesson_draft(episode: EpisodeRecord, lesson: Lesson, kind: str, reason: str) -> EntryDraft:
    """File ``lesson`` from ``episode`` as a draft of ``kind`` for the episode's env/category."""
    return EntryDraft(
        kind=kind,
        title=lesson.title,
        principle=lesson.principle,
        when_to_apply=lesson.when_to_apply,
        failure_point=lesson.failure_point,
        flawed_action=lesson.flawed_action,
        correction=lesson.correction,
        env=episode.env_id,
        category=episode.category,
        source="distiller:analytic",
        trajectory_ids=[episode.episode_id],
        reason=reason,
    )


def failure_notes(episode: EpisodeRecord, max_notes: int) -> list[EntryDraft]:
    """Counterfactual notes for one failed episode, most decisive cause first."""
    lessons = distill_adapter_for(episode.env_id).failure_lessons(episode)
    reason = f"failed episode (score {episode.score:.1f}) in {episode.category}"
    return [lesson_draft(episode, lesson, "mistake", reason) for lesson in lessons[:max_notes]]
