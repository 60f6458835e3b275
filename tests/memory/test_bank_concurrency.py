"""Several processes adding, editing and retrieving at once lose no update."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memory import BankConfig, EntryDraft, RetrievalConfig, RetrievalQuery, SkillBank

REPO = Path(__file__).resolve().parents[2]
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

    from skillrl_core.records import EpisodeRecord, TurnRecord

    torch.set_num_threads(1)
    with SkillBank.open(_config(Path(workspace))) as bank:
        bank.store.embedder.embed(["warm up"])
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
        episode = EpisodeRecord("webshop", "g", "i", "footwear", turns=[turn],
                                success=index % 2 == 0)  # fmt: skip
        bank.trajectories.save_episodes([episode])


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


class LockProbingEmbedder:
    """The real embedder, which also checks whether the bank's write lock is free while it runs.

    Loading a model takes seconds: a bank that embeds inside its write transaction makes every
    other writer wait that long (and, with several, time out).
    """

    def __init__(self, real, database: Path):
        self.real, self.database = real, database
        self.name, self.dim = real.name, real.dim
        self.lock_held: list[bool] = []

    def embed(self, texts: list[str]):
        probe = sqlite3.connect(self.database, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            self.lock_held.append(False)
        except sqlite3.OperationalError:
            self.lock_held.append(True)
        finally:
            probe.close()
        return self.real.embed(texts)


def test_models_run_before_the_write_lock_is_taken(tmp_path, embedder, samples):
    config = BankConfig(workspace=tmp_path / "ws")
    probing = LockProbingEmbedder(embedder, config.workspace / "bank.sqlite")
    with SkillBank.open(config, embedder=probing) as bank:
        entry = bank.add(samples.size).entry
        bank.edit(entry.id, author="a", title="Choose the right size")
        bank.retire(entry.id, author="a")
        bank.revert(entry.id, 2, author="a")
        bank.retrieve([RetrievalQuery("size 9 shoes", "", "webshop", "footwear")])
        assert bank.get(entry.id).title == "Choose the right size"
    assert len(probing.lock_held) >= 4 and not any(probing.lock_held)


def _skills_cli(workspace: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "cli", "skills", *args, "--workspace", str(workspace)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.slow
def test_cli_processes_adding_and_editing_at_once_all_succeed(tmp_path, embedder):
    workspace = tmp_path / "ws"
    with SkillBank.open(BankConfig(workspace=workspace), embedder=embedder) as bank:
        shared = bank.add(
            EntryDraft(kind="general", title="Shared rule", principle="Read the instruction.")
        ).entry
    edits = [f"edit by shell {i}" for i in range(2)]
    processes = [_skills_cli(workspace, "edit", shared.id, "--when-to-apply", text)
                 for text in edits]  # fmt: skip
    processes += [
        _skills_cli(workspace, "add", "--kind", "general", "--title", title,
                    "--principle", principle)
        for title, principle in TOPICS[:2]
    ]  # fmt: skip
    outputs = [p.communicate(timeout=600)[0] for p in processes]
    for process, output in zip(processes, outputs, strict=True):
        assert process.returncode == 0, output
        assert "Traceback" not in output and "locked" not in output, output
    with SkillBank.open(BankConfig(workspace=workspace), embedder=embedder) as bank:
        history = bank.history(shared.id)
        assert sorted(r.data["when_to_apply"] for r in history[1:]) == edits
        assert [r.revision for r in history] == [1, 2, 3]
        assert {t for t, _ in TOPICS[:2]} <= {e.title for e in bank.list()}
        assert bank.check().ok
