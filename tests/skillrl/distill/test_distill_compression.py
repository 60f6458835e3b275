from __future__ import annotations

import pytest
from distill_episodes import episode

from memory.types import Entry
from skillrl.distill.compression import measure_compression, render_entry
from skillrl.distill.trajectory import render_trajectory


def words(text: str) -> int:
    return len(text.split())


def test_compression_compares_each_injected_entry_with_its_source_trajectories():
    a, b = (episode(success=True, chosen={"size": "large"}) for _ in range(2))
    skill = Entry(
        kind="task",
        title="Set the size",
        principle="Click the requested size.",
        env="webshop",
        category="fashion",
        id="s1",
        trajectory_ids=[a.episode_id, b.episode_id],
    )
    seeded = Entry(kind="general", title="Verify", principle="Check.", id="g1")
    report = measure_compression(
        [[skill, seeded], [skill], [seeded]], {a.episode_id: a, b.episode_id: b}, words, "words"
    )
    assert report.turns == 2  # the third turn had only an entry without known sources
    assert report.entries_without_sources == 1
    raw = (words(render_trajectory(a)) + words(render_trajectory(b))) / 2
    assert report.raw_per_turn == pytest.approx(raw)
    assert report.injected_per_turn == words(render_entry(skill))
    assert report.ratio == pytest.approx(raw / words(render_entry(skill)))
    assert report.ratio > 5


def test_custom_cost_measures_what_the_prompt_shows():
    a = episode(success=True, chosen={"size": "large"})
    skill = Entry(kind="task", title="t", principle="p", id="s1", trajectory_ids=[a.episode_id])
    report = measure_compression(
        [[skill]], {a.episode_id: a}, words, "words", injected=lambda entries: 2 * len(entries)
    )
    assert report.injected_tokens == 2
