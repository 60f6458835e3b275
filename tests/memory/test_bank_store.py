"""The bank's store contract, on every configured store."""

from __future__ import annotations

import dataclasses

import pytest

from memory import BankConfig, RetrievalConfig, RetrievalQuery, SkillBank
from memory.store import BankStore
from skillrl_core.errors import (
    BankError,
    InvalidEntryError,
    SkillNotFoundError,
    StaleRevisionError,
)
from skillrl_core.records import EpisodeRecord, TurnRecord


def test_add_get_list_count(bank, samples):
    size = bank.add(samples.size, author="alice")
    price = bank.add(samples.price)
    general = bank.add(samples.general)
    assert not size.merged and size.entry.id != price.entry.id
    got = bank.get(size.entry.id)
    assert got.title == samples.size.title and got.revision == 1 and got.status == "active"
    assert got.provenance[0]["author"] == "alice" and got.support_count == 1
    assert [e.id for e in bank.list(kind="task")] == [size.entry.id, price.entry.id]
    assert [e.id for e in bank.list(kind="general")] == [general.entry.id]
    assert bank.list(env="webshop", category="apparel") == []
    assert bank.count() == 3 and bank.count(kind="task") == 2
    with pytest.raises(SkillNotFoundError, match="nope"):
        bank.get("nope")


def test_near_duplicate_merges_instead_of_adding(bank, samples):
    first = bank.add(dataclasses.replace(samples.size, trajectory_ids=["ep1"]))
    again = bank.add(
        dataclasses.replace(samples.size, title=samples.size.title + ".", trajectory_ids=["ep2"]),
        author="distiller",
    )
    assert again.merged and again.entry.id == first.entry.id
    assert again.similarity is not None and again.similarity > 0.9
    assert again.entry.support_count == 2
    assert again.entry.trajectory_ids == ["ep1", "ep2"]
    assert [p["author"] for p in again.entry.provenance] == ["person", "distiller"]
    assert bank.count() == 1
    # The same text in another category is a different skill.
    other = bank.add(dataclasses.replace(samples.size, category="apparel"))
    assert not other.merged and bank.count() == 2


def test_invalid_drafts_are_refused_and_nothing_is_written(bank, samples):
    bank.add(samples.general)
    bad = [
        dataclasses.replace(samples.size, category=None),
        dataclasses.replace(samples.general, title="  "),
        dataclasses.replace(samples.general, kind="skill"),
    ]
    for draft in bad:
        with pytest.raises(InvalidEntryError):
            bank.add(draft)
    # A batch with one bad draft writes none of them.
    with pytest.raises(InvalidEntryError, match="draft 1"):
        bank.add_many([samples.price, dataclasses.replace(samples.price, principle="")])
    assert bank.count(status=None) == 1 and bank.check().ok


def test_edit_keeps_history_and_revert_restores(bank, samples):
    entry = bank.add(samples.size).entry
    edited = bank.edit(entry.id, author="bob", reason="clearer", title="Choose the right size")
    assert edited.revision == 2 and edited.title == "Choose the right size"
    history = bank.history(entry.id)
    assert [(r.revision, r.author) for r in history] == [(1, "person"), (2, "bob")]
    assert history[0].data["title"] == samples.size.title and history[1].reason == "clearer"
    reverted = bank.revert(entry.id, 1, author="carol")
    assert reverted.revision == 3 and reverted.title == samples.size.title
    with pytest.raises(InvalidEntryError, match="principle"):
        bank.edit(entry.id, author="bob", principle="")
    with pytest.raises(InvalidEntryError, match="support_count"):
        bank.edit(entry.id, author="bob", support_count=9)
    with pytest.raises(SkillNotFoundError):
        bank.revert(entry.id, 42, author="bob")
    assert bank.get(entry.id).revision == 3 and bank.check().ok


def test_an_edit_from_a_revision_the_entry_has_moved_past_is_refused_and_saves_nothing(
    bank, samples
):
    entry = bank.add(samples.size).entry
    bank.edit(entry.id, author="cli", title="Changed from the CLI")
    with pytest.raises(StaleRevisionError, match="revision 2, not 1") as refused:
        bank.edit(entry.id, author="view", expected_revision=1, title="From a stale form")
    assert (refused.value.expected, refused.value.current) == (1, 2)
    assert bank.get(entry.id).title == "Changed from the CLI"
    assert [r.revision for r in bank.history(entry.id)] == [1, 2]
    saved = bank.edit(entry.id, author="view", expected_revision=2, title="From a fresh form")
    assert saved.revision == 3 and saved.title == "From a fresh form"


def _query(text: str, category: str = "footwear") -> RetrievalQuery:
    return RetrievalQuery(instruction=text, observation="", env="webshop", category=category)


def test_retrieval_is_batched_filtered_and_recorded(bank, samples):
    size = bank.add(samples.size).entry
    bank.add(samples.price)
    general = bank.add(samples.general).entry
    mistake = bank.add(samples.mistake).entry
    config = RetrievalConfig(k_general=1, k_task=1, k_mistakes=1, min_similarity=0.0)
    results = bank.retrieve(
        [_query("buy running shoes in size 9"), _query("a size 9 shirt", category="apparel")],
        config,
    )
    shoes, shirt = results
    assert [r.entry.id for r in shoes.task] == [size.id]
    assert [r.entry.id for r in shoes.general] == [general.id]
    assert [r.entry.id for r in shoes.mistakes] == [mistake.id]
    assert shirt.task == []  # no apparel skills: footwear ones are never served for apparel
    assert all(0.0 <= r.similarity <= 1.0 for r in shoes.all)
    assert bank.get(size.id).times_retrieved == 1
    assert bank.get(general.id).times_retrieved == 2
    strict = bank.retrieve([_query("buy running shoes")], RetrievalConfig(min_similarity=0.99))
    # The cut-off drops task skills and notes; the best general skills are always served.
    assert strict[0].task == [] and strict[0].mistakes == []
    assert [r.entry.id for r in strict[0].general] == [general.id]
    assert strict[0].general[0].similarity < 0.99
    bank.retrieve([_query("buy running shoes in size 9")], config, record=False)
    assert bank.get(size.id).times_retrieved == 1


def test_a_query_without_category_searches_every_task_category_of_its_env(bank, samples):
    size = bank.add(samples.size).entry
    shirt = bank.add(
        dataclasses.replace(samples.price, category="apparel", title="Shirt sizes run small")
    ).entry
    bank.add(dataclasses.replace(samples.size, env="otherenv", title="Other env's sizes"))
    config = RetrievalConfig(k_task=3, min_similarity=0.0)
    query = RetrievalQuery("what shoe size should I pick", "", "webshop", None)
    task = bank.retrieve([query], config, record=False)[0].task
    assert [r.entry.id for r in task][0] == size.id
    assert {r.entry.id for r in task} == {size.id, shirt.id}  # never another env's skills
    assert [r.similarity for r in task] == sorted((r.similarity for r in task), reverse=True)
    one = bank.retrieve([query], RetrievalConfig(k_task=1, min_similarity=0.0), record=False)
    assert [r.entry.id for r in one[0].task] == [size.id]
    # With a category, only that category is searched (as before).
    apparel = bank.retrieve([_query("what shoe size", "apparel")], config, record=False)
    assert [r.entry.id for r in apparel[0].task] == [shirt.id]


def test_retired_entries_leave_retrieval_and_come_back(bank, samples):
    size = bank.add(samples.size).entry
    config = RetrievalConfig(min_similarity=0.0)
    bank.retire(size.id, author="alice", reason="wrong")
    assert bank.retrieve([_query("size 9 shoes")], config, record=False)[0].task == []
    assert bank.list() == [] and bank.list(status="retired")[0].id == size.id
    bank.restore(size.id, author="alice")
    assert [r.entry.id for r in bank.retrieve([_query("size 9 shoes")], config)[0].task] == [
        size.id
    ]
    assert [r.data["status"] for r in bank.history(size.id)] == ["active", "retired", "active"]
    bank.remove(size.id)
    assert bank.count(status=None) == 0 and bank.check().ok


def _episode(episode_id: str, success: bool, retrieved: list[str], **kw) -> EpisodeRecord:
    turns = [
        TurnRecord(turn=0, observation="o", available_actions=["a"], action="a",
                   action_valid=True, reward=0.0, retrieved_ids=retrieved),
        TurnRecord(turn=1, observation="o2", available_actions=["a"], action="a",
                   action_valid=True, reward=1.0 if success else 0.0, retrieved_ids=retrieved),
    ]  # fmt: skip
    defaults = dict(env_id="webshop", goal_id="g", instruction="i", category="footwear",
                    split="train", group_id="grp")  # fmt: skip
    return EpisodeRecord(turns=turns, success=success, episode_id=episode_id, **{**defaults, **kw})


def test_episodes_are_stored_once_and_update_entry_stats(bank, samples):
    size = bank.add(samples.size).entry
    episodes = [_episode("e1", True, [size.id]), _episode("e2", False, [size.id]),
                _episode("e3", True, [], split="test", group_id=None)]  # fmt: skip
    bank.trajectories.save_episodes(episodes)
    bank.trajectories.save_episodes(episodes[:2])  # idempotent: stats are not counted twice
    got = bank.get(size.id)
    assert (got.episodes_retrieved, got.success_episodes, got.failure_episodes) == (2, 1, 1)
    assert [e.episode_id for e in bank.trajectories.episodes()] == ["e1", "e2", "e3"]
    assert [e.episode_id for e in bank.trajectories.episodes(success=True)] == ["e1", "e3"]
    assert [e.episode_id for e in bank.trajectories.episodes(split="test")] == ["e3"]
    assert [e.episode_id for e in bank.trajectories.episodes(group_id="grp", limit=1)] == ["e1"]
    assert [e.episode_id for e in bank.trajectories.episodes(episode_id="e2")] == ["e2"]
    assert bank.trajectories.episodes(episode_id="missing") == []
    restored = bank.trajectories.episodes(split="test")[0]
    assert restored == episodes[2]
    assert bank.trajectories.episode_totals(env="webshop", category="footwear") == (3, 2)
    bank.trajectories.mark_distilled(["e1", "e2"], distiller="analytic")
    assert [e.episode_id for e in bank.trajectories.episodes(distilled=False)] == ["e3"]
    with pytest.raises(SkillNotFoundError):
        bank.trajectories.mark_distilled(["e3", "missing"], distiller="analytic")
    assert [e.episode_id for e in bank.trajectories.episodes(distilled=False)] == ["e3"]


def test_the_old_episode_methods_forward_to_bank_trajectories(bank, samples):
    size = bank.add(samples.size).entry
    bank.trajectories.save_episodes(
        [_episode("e1", True, [size.id]), _episode("e2", False, [], skills_enabled=False)]
    )
    assert [e.episode_id for e in bank.trajectories.episodes()] == ["e1", "e2"]
    assert [e.episode_id for e in bank.trajectories.episodes(success=False)] == ["e2"]
    bank.trajectories.mark_distilled(["e1"], distiller="analytic")
    assert [e.episode_id for e in bank.trajectories.episodes(distilled=False)] == ["e2"]
    assert bank.trajectories.episode_totals() == bank.trajectories.episode_totals() == (2, 1)
    assert bank.trajectories.episode_totals(skills_only=True) == (1, 1)


def test_a_read_only_bank_refuses_changes_through_every_store(bank, samples):
    bank.add(samples.size)
    store = bank.store
    reader = SkillBank(BankStore(bank.config, store.engine, store.index, None, read_only=True))
    changes = {
        "add": lambda: reader.add(samples.price),
        "save_episodes": lambda: reader.trajectories.save_episodes([_episode("e1", True, [])]),
        "mark_distilled": lambda: reader.trajectories.mark_distilled(["e1"], distiller="x"),
        "snapshot": lambda: reader.snapshots.create("s"),
    }
    for name, change in changes.items():
        with pytest.raises(BankError, match="read-only"):
            change()
        assert reader.count() == 1, name
    assert reader.trajectories.episodes() == [] and reader.snapshots.list() == []
    assert not reader.store.embedder_loaded  # refused before any model was loaded


def test_snapshots_list_and_diff(bank, samples):
    size = bank.add(samples.size).entry
    bank.snapshots.create("cycle-0")
    price = bank.add(samples.price).entry
    bank.edit(size.id, author="a", title="Choose the right size")
    bank.snapshots.create("cycle-1")
    assert [s.name for s in bank.snapshots.list()] == ["cycle-0", "cycle-1"]
    diff = bank.snapshots.diff("cycle-0", "cycle-1")
    assert [e["id"] for e in diff.added] == [price.id] and diff.removed == []
    assert diff.changed[0].fields == {"title": (samples.size.title, "Choose the right size")}
    assert bank.snapshots.diff("cycle-1").empty
    with pytest.raises(SkillNotFoundError):
        bank.snapshots.diff("cycle-9")
    with pytest.raises(Exception, match="already exists"):
        bank.snapshots.create("cycle-0")


def test_a_snapshot_restores_into_an_empty_bank_as_it_was(bank, samples, tmp_path, embedder):
    size = bank.add(samples.size).entry
    retired = bank.add(samples.mistake).entry
    bank.retire(retired.id, author="a")
    bank.snapshots.create("cycle-0")
    bank.add(samples.price)
    bank.edit(size.id, author="a", title="Choose the right size")
    with SkillBank.open(BankConfig(workspace=tmp_path / "copy"), embedder=embedder) as copy:
        assert bank.snapshots.restore_into("cycle-0", copy.store) == 2
        assert copy.get(size.id).title == samples.size.title  # the content as snapshotted
        assert copy.get(retired.id).status == "retired" and copy.count() == 1
        (hits,) = copy.retrieve([_query("buy running shoes in size 9")], record=False)
        assert [h.entry.id for h in hits.task] == [size.id]  # only the active entry is indexed
        assert hits.mistakes == []
        with pytest.raises(BankError, match="empty bank"):
            bank.snapshots.restore_into("cycle-0", copy.store)
    with pytest.raises(SkillNotFoundError):
        bank.snapshots.entries("cycle-9")


def test_a_failing_index_write_leaves_sql_unchanged(bank, monkeypatch, samples):
    bank.add(samples.general)

    def broken(*args, **kwargs):
        raise RuntimeError("index is down")

    monkeypatch.setattr(bank.store.index, "upsert", broken)
    with pytest.raises(RuntimeError):
        bank.add(samples.size)
    assert bank.count(status=None) == 1


def test_a_failing_sql_write_leaves_the_index_unchanged(bank, monkeypatch, samples):
    entry = bank.add(samples.size).entry
    before = {r.id: r.metadata for r in bank.store.index.get()}

    def broken(*args, **kwargs):  # fails after the index was written, before the commit
        raise RuntimeError("database went away")

    monkeypatch.setattr(bank, "_entry", broken)
    with pytest.raises(RuntimeError):
        bank.add(samples.price)
    with pytest.raises(RuntimeError):
        bank.edit(entry.id, author="a", principle="Something else entirely about prices.")
    with pytest.raises(RuntimeError):
        bank.retire(entry.id, author="a")
    monkeypatch.undo()
    assert {r.id: r.metadata for r in bank.store.index.get()} == before
    assert bank.count() == 1 and bank.get(entry.id).revision == 1 and bank.check().ok
    top = bank.retrieve([_query("size 9 shoes")], RetrievalConfig(min_similarity=0.0))[0]
    assert [r.entry.id for r in top.task] == [entry.id]


def test_one_lesson_is_served_once_preferring_the_query_category(bank, samples):
    from dataclasses import replace

    # The same lesson learnt in two categories (their texts differ enough not to merge).
    elsewhere = bank.add(replace(samples.mistake, category="apparel")).entry
    own = bank.add(
        replace(
            samples.mistake,
            principle="On shoe pages: pick the colour and the size first, then buy now.",
            correction="click[white] then click[buy now]",
        )
    ).entry
    assert own.id != elsewhere.id
    config = RetrievalConfig(k_general=0, k_task=0, k_mistakes=2, min_similarity=0.0)
    (shoes,) = bank.retrieve([_query("buy running shoes, colour black")], config, record=False)
    assert [r.entry.id for r in shoes.mistakes] == [own.id]


def test_a_note_filed_word_for_word_in_several_categories_is_one_note_of_every_category(
    bank, samples
):
    from dataclasses import replace

    # One lesson noted word for word in eight categories, in one batch and then one at a time.
    categories = [f"c{i}" for i in range(8)]
    first = bank.add_many([replace(samples.mistake, category=c) for c in categories[:4]])
    later = [bank.add(replace(samples.mistake, category=c)) for c in categories[4:]]
    [note] = bank.list(kind="mistake")
    assert {r.entry.id for r in first + later} == {note.id}
    assert [r.merged for r in first + later] == [False] + [True] * 7
    assert note.category is None and note.support_count == 8 and note.revision == 2
    assert "word for word for c1" in bank.history(note.id)[-1].reason
    assert bank.check().ok  # the index holds the note as it now reads
    config = RetrievalConfig(k_general=0, k_task=0, k_mistakes=1, min_similarity=0.0)
    for category in ("c0", "c5", "elsewhere"):
        (served,) = bank.retrieve([_query("buy running shoes", category)], config, record=False)
        assert [r.entry.id for r in served.mistakes] == [note.id]
    # A copy of a note stored earlier widens it too; other words stay a note of their category.
    other = replace(samples.mistake, title="Bought without a size", category="c0")
    kept = bank.add(other).entry
    assert kept.category == "c0"
    assert bank.add(replace(other, category="c1")).entry.id == kept.id
    assert bank.get(kept.id).category is None and bank.check().ok


def test_tied_entries_are_served_in_one_order_whatever_order_they_were_written_in(
    tmp_path, embedder, samples
):
    """Two banks with the same entries, written in opposite orders, serve the same ones."""
    from dataclasses import replace

    from memory import BankConfig

    # The same task skill in three categories: identical vectors, so every query ties them.
    drafts = [replace(samples.size, category=c) for c in ("grocery", "apparel", "footwear")]
    config = RetrievalConfig(k_general=0, k_task=2, k_mistakes=0, min_similarity=0.0)
    served = []
    for name, order in (("forward", drafts), ("backward", drafts[::-1])):
        with SkillBank.open(BankConfig(workspace=tmp_path / name), embedder=embedder) as bank:
            for draft in order:
                bank.add(draft)
            (hits,) = bank.retrieve([_query("buy shoes in size 9", "")], config, record=False)
            served.append([r.entry.category for r in hits.task])
    assert served == [["apparel", "footwear"]] * 2


def test_ties_in_one_transaction_are_broken_by_content_not_by_random_ids(bank, samples):
    """A resumed run's entries get other ids than an uninterrupted run's: ids must not decide."""
    from dataclasses import replace

    from memory.retrieval import _settle
    from memory.types import RetrievedEntry

    written = bank.add(samples.mistake).entry
    grocery = replace(written, id="0" * 32, category="grocery")  # the lower id
    beauty = replace(written, id="f" * 32, category="beauty", created_at=written.created_at)
    for hits in ([grocery, beauty], [beauty, grocery]):
        settled = _settle([RetrievedEntry(e, 0.5) for e in hits], 1)
        assert [r.entry.category for r in settled] == ["beauty"]


def test_copies_whose_similarities_differ_by_float_noise_still_tie(bank, samples):
    """Identical texts embedded in different batches agree only to rounding; a rounding-bucket
    edge between their similarities must not decide which copy is served, nor their age."""
    from dataclasses import replace

    from memory.retrieval import TIE, _settle
    from memory.types import RetrievedEntry

    written = bank.add(samples.mistake).entry
    beauty = replace(written, id="f" * 32, category="beauty", created_at="9999-12-31T00:00:00")
    grocery = replace(written, id="0" * 32, category="grocery")
    assert beauty.created_at > grocery.created_at
    edge = 0.4999995  # a multiple of TIE / 2: the old bucketing put these two apart
    for low, high in ((edge - 0.2 * TIE, edge + 0.2 * TIE), (0.5 - 0.4 * TIE, 0.5 + 0.4 * TIE)):
        for hits in (
            [RetrievedEntry(grocery, high), RetrievedEntry(beauty, low)],
            [RetrievedEntry(beauty, low), RetrievedEntry(grocery, high)],
        ):
            assert [r.entry.id for r in _settle(hits, 1)] == [beauty.id]
    far = [RetrievedEntry(grocery, 0.5 + 3 * TIE), RetrievedEntry(beauty, 0.5)]
    assert [r.entry.id for r in _settle(far, 1)] == [grocery.id]  # not a tie: more similar wins
