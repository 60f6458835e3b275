from __future__ import annotations

import pytest
from distill_episodes import episode, unfinished_episode

from skillrl.distill import AnalyticDistiller, PipelineConfig, distill_pending

pytestmark = pytest.mark.slow


def _mixed():
    return [
        episode(
            success=False, chosen={"size": "medium", "color": "navy"}, missed_options=["large"]
        ),
        episode(
            success=False, chosen={"size": "small", "color": "navy"}, missed_options=["x-large"]
        ),
        episode(success=False, chosen={"color": "navy"}, missed_options=["large"]),
        episode(success=False, chosen={"size": "large", "color": "black"}, missed_options=["navy"]),
        episode(success=False, chosen={"size": "large", "color": "navy"}, price_ok=False),
        episode(success=True, chosen={"size": "large", "color": "navy"}),
        episode(success=True, chosen={"size": "large", "color": "navy"}, category="beauty"),
        unfinished_episode(),
    ]


def test_distill_pending_adds_entries_and_second_pass_adds_nothing(bank):
    bank.trajectories.save_episodes(_mixed())
    first = distill_pending(bank, AnalyticDistiller())
    assert first.episodes_seen == first.episodes_distilled == 8
    assert first.added and not first.rejected
    count = bank.count(status=None)
    assert count == len(first.added)
    assert bank.trajectories.episodes(distilled=False) == []
    second = distill_pending(bank, AnalyticDistiller())
    assert (second.episodes_seen, second.drafts, second.added, second.merged) == (0, 0, [], [])
    assert bank.count(status=None) == count


def test_paraphrased_notes_merge_and_distinct_lessons_do_not(bank):
    # medium-for-large, small-for-x-large, no-size-for-large: three wordings of one lesson.
    # One episode per batch: the drafts meet only in the bank, by MiniLM cosine.
    bank.trajectories.save_episodes(_mixed()[:4])
    distill_pending(bank, AnalyticDistiller(), PipelineConfig(batch_size=1))
    notes = {e.title: e for e in bank.list(kind="mistake")}
    size = notes["Select the requested size before Buy Now"]
    assert size.support_count == 3
    assert notes["Select the requested color before Buy Now"].support_count == 1
    assert len(notes) == 2


def test_validation_episodes_are_not_distilled_by_default(bank):
    held_out = episode(
        success=False, chosen={"size": "medium"}, missed_options=["large"], split="eval"
    )
    bank.trajectories.save_episodes([held_out])
    assert distill_pending(bank, AnalyticDistiller()).episodes_seen == 0
    assert bank.count() == 0
    everything = distill_pending(bank, AnalyticDistiller(), PipelineConfig(splits=None))
    assert everything.episodes_distilled == 1


def test_one_lesson_in_one_batch_becomes_one_entry_with_every_source(bank):
    episodes = _mixed()[:3]
    bank.trajectories.save_episodes(episodes)
    report = distill_pending(bank, AnalyticDistiller())
    [entry_id] = report.added
    assert set(bank.get(entry_id).trajectory_ids) == {e.episode_id for e in episodes}


def test_a_note_learnt_word_for_word_in_two_categories_is_filed_once(bank):
    """Over the price bound in fashion and in beauty: one lesson, so one note for every category.

    A copy per category made which copy a turn was served depend on which was written first.
    """
    over_budget = [
        episode(
            success=False, chosen={"size": "large", "color": "navy"}, price_ok=False, category=c
        )
        for c in ("fashion", "beauty", "grocery")
    ]
    bank.trajectories.save_episodes(over_budget[:2])
    report = distill_pending(bank, AnalyticDistiller())
    [note] = bank.list(kind="mistake")
    assert report.added == [note.id] and report.merged == []
    assert note.title == "Respect the price bound" and note.category is None
    assert note.support_count == 2
    assert set(note.trajectory_ids) == {e.episode_id for e in over_budget[:2]}
    # A later pass that learns it again in a third category strengthens the same note.
    bank.trajectories.save_episodes(over_budget[2:])
    again = distill_pending(bank, AnalyticDistiller())
    assert again.merged == [note.id] and again.added == []
    assert bank.count(kind="mistake") == 1 and bank.get(note.id).support_count == 3
