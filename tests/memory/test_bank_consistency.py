"""SQL and the index never silently disagree; the migrated schema matches the models."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from memory import BankConfig, RetrievalConfig, RetrievalQuery, SkillBank
from memory.models import Base
from skillrl_core.errors import BankInconsistentError


def test_migrations_create_exactly_the_models_schema(local_bank):
    with local_bank.store.engine.connect() as connection:
        diffs = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diffs == []


def test_opening_detects_and_repairs_a_disagreeing_index(tmp_path, embedder, samples):
    config = BankConfig(workspace=tmp_path / "ws")
    with SkillBank.open(config, embedder=embedder) as bank:
        size = bank.add(samples.size).entry
        general = bank.add(samples.general).entry
        bank.store.index.delete([size.id])  # as if a crash had lost it
    strict = BankConfig(workspace=tmp_path / "ws", on_mismatch="error")
    with pytest.raises(BankInconsistentError, match="1 missing"):
        SkillBank.open(strict, embedder=embedder)
    with SkillBank.open(config, embedder=embedder) as bank:  # default: repair from SQL
        assert bank.check().ok
        query = RetrievalQuery("size 9 running shoes", "", "webshop", "footwear")
        hits = bank.retrieve([query], RetrievalConfig(min_similarity=0.0), record=False)[0]
        assert [r.entry.id for r in hits.task] == [size.id]
        bank.store.index.clear()
        assert bank.check().missing == sorted([size.id, general.id])
        assert bank.reindex() == 2 and bank.check().ok


def test_a_bank_refuses_another_embedder_until_reindexed(tmp_path, embedder, samples):
    config = BankConfig(workspace=tmp_path / "ws")
    with SkillBank.open(config, embedder=embedder) as bank:
        bank.add(samples.size)
    other = BankConfig(workspace=tmp_path / "ws", embedder="my-org/other-model")
    with pytest.raises(BankInconsistentError, match="reindex"):
        SkillBank.open(other)


def test_retrieval_skips_index_records_whose_entry_is_not_active(local_bank, samples):
    size = local_bank.add(samples.size).entry
    local_bank.retire(size.id, author="a")
    # Put the stale vector back behind SQL's back: retrieval must still not serve it.
    vector = local_bank.store.embedder.embed([samples.size.text_for_embedding()])
    metadata = {"kind": "task", "env": "webshop", "category": "footwear", "revision": 2}
    local_bank.store.index.upsert([size.id], vector, [metadata])
    query = RetrievalQuery("size 9 running shoes", "", "webshop", "footwear")
    assert local_bank.retrieve([query], RetrievalConfig(min_similarity=0.0))[0].task == []
    assert local_bank.check().extra == [size.id]


def test_upgrading_an_older_bank_fills_in_which_episodes_used_skills(tmp_path, embedder):
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import text

    from memory.db import MIGRATIONS
    from skillrl_core.records import EpisodeRecord

    config = BankConfig(workspace=tmp_path / "old")
    with SkillBank.open(config, embedder=embedder) as bank:
        with_skills = EpisodeRecord(env_id="webshop", goal_id="g1", instruction="i", category="c")
        without = EpisodeRecord(
            env_id="webshop", goal_id="g2", instruction="i", category="c", skills_enabled=False
        )
        bank.trajectories.save_episodes([with_skills, without])
        alembic = Config()
        alembic.set_main_option("script_location", str(MIGRATIONS))
        with bank.store.engine.begin() as connection:  # back to the first schema, as an old bank
            alembic.attributes["connection"] = connection
            command.downgrade(alembic, "0001")
    with SkillBank.open(config, embedder=embedder) as bank:  # opening upgrades it again
        with bank.store.engine.connect() as connection:
            query = text("SELECT goal_id, skills_enabled FROM trajectories")
            rows = dict(connection.execute(query).all())
        assert {goal: bool(on) for goal, on in rows.items()} == {"g1": True, "g2": False}
        assert bank.trajectories.episode_totals(skills_only=True) == (1, 0)
        assert bank.trajectories.episode_totals() == (2, 0)


@pytest.mark.slow
def test_a_partition_whose_vector_files_are_gone_is_found_and_reported(tmp_path, caplog):
    import shutil

    import numpy as np

    from memory.consistency import warn_if_unsearchable
    from memory.index import VectorIndex

    config = BankConfig(workspace=tmp_path)
    index = VectorIndex(config)
    vectors = np.random.default_rng(0).random((1200, 8), dtype=np.float32)
    metadata = {"kind": "general", "revision": 1}
    index.upsert([f"e{i}" for i in range(1200)], vectors, [metadata] * 1200)
    assert index.unsearchable_partitions() == []
    index.close()
    # Enough vectors that Chroma compacted its log into the segment files; then they go.
    segments = [p for p in config.chroma_path.iterdir() if p.is_dir()]
    assert segments
    for folder in segments:
        shutil.rmtree(folder)
    damaged = VectorIndex(config, read_only=True)
    try:
        assert len(damaged.unsearchable_partitions()) == 1
        store = type("Store", (), {"index": damaged, "config": config})()
        with caplog.at_level("WARNING"):
            assert warn_if_unsearchable(store)
        assert "skillrl skills reindex" in caplog.text and "missing or damaged" in caplog.text
    finally:
        damaged.close()


def test_a_query_for_more_hits_than_one_sql_statement_holds_is_split_and_complete(tmp_path):
    import numpy as np

    from memory.index import QUERY_HITS_PER_CALL, VectorIndex

    index = VectorIndex(BankConfig(workspace=tmp_path))
    try:
        vectors = np.random.default_rng(1).random((300, 8), dtype=np.float32)
        metadata = {"kind": "case", "env": "webshop", "revision": 1}
        index.upsert([f"c{i}" for i in range(300)], vectors, [metadata] * 300)
        rows = 400
        n = 128
        assert rows * n > 4 * QUERY_HITS_PER_CALL  # one call this size failed in Chroma
        queries = np.random.default_rng(2).random((rows, 8), dtype=np.float32)
        hits = index.query(queries, n, ("case", "webshop", ""))
        assert len(hits) == rows and all(len(row) == n for row in hits)
        first = index.query(queries[:1], n, ("case", "webshop", ""))[0]
        assert [h.id for h in hits[0]] == [h.id for h in first]
    finally:
        index.close()
