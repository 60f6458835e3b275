"""Several processes adding, editing and retrieving at once lose no update."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from memory import BankConfig, EntryDraft, RetrievalConfig, RetrievalQuery, SkillBank

WORKERS = 3
EDITS = 4
RETRIEVALS = 3
TOPICS = [
    ("Search with the brand name", "Put the brand in the first search query."),
    ("Open the reviews tab", "Read customer reviews before choosing between two items."),
    ("Check the material", "Confirm cotton or leather on the description page."),
    ("Go back after a dead end", "Click back to search when no result matches."),
    ("Prefer the first page", "Most matching items appear on the first result page."),
    ("Watch the quantity", "Packs of several items change the price per unit."),
]


def _config(workspace: Path) -> BankConfig:
    return BankConfig(workspace=workspace, merge_threshold=0.99)


def _worker(workspace: str, shared_id: str, index: int, barrier) -> None:
    import torch

    from skillrl.records import EpisodeRecord, TurnRecord

    torch.set_num_threads(1)
    with SkillBank.open(_config(Path(workspace))) as bank:
        bank.embedder.embed(["warm up"])
        barrier.wait(timeout=300)
        for title, principle in TOPICS[2 * index : 2 * index + 2]:
            bank.add(EntryDraft(kind="general", title=title, principle=principle))
        for k in range(EDITS):
            bank.edit(shared_id, author=f"w{index}", when_to_apply=f"worker {index} edit {k}")
        query = RetrievalQuery("buy something", "", "webshop", "footwear")
        for _ in range(RETRIEVALS):
            bank.retrieve([query], RetrievalConfig(k_general=20, min_similarity=-1.0))
        turn = TurnRecord(turn=0, observation="o", available_actions=["a"], action="a",
                          action_valid=True, reward=1.0, retrieved_ids=[shared_id])  # fmt: skip
        bank.save_episodes([EpisodeRecord("webshop", "g", "i", "footwear", turns=[turn],
                                          success=index % 2 == 0)])  # fmt: skip


@pytest.mark.slow
def test_processes_adding_editing_and_retrieving_at_once_lose_nothing(tmp_path, embedder):
    workspace = tmp_path / "ws"
    with SkillBank.open(_config(workspace), embedder=embedder) as bank:
        shared = bank.add(
            EntryDraft(kind="general", title="Shared rule", principle="Read the instruction.")
        ).entry
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    workers = [
        ctx.Process(target=_worker, args=(str(workspace), shared.id, i, barrier))
        for i in range(WORKERS)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=600)
    assert [w.exitcode for w in workers] == [0] * WORKERS
    with SkillBank.open(_config(workspace), embedder=embedder) as bank:
        assert bank.count() == 1 + 2 * WORKERS
        entry = bank.get(shared.id)
        assert entry.revision == 1 + WORKERS * EDITS
        assert [r.revision for r in bank.history(shared.id)] == list(range(1, entry.revision + 1))
        assert entry.times_retrieved == WORKERS * RETRIEVALS
        assert entry.episodes_retrieved == WORKERS
        assert entry.success_episodes == len(range(0, WORKERS, 2))
        assert bank.check().ok
