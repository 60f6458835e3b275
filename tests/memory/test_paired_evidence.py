"""Paired-rollout figures of entries: the math, storing them, and withholding an entry."""

from __future__ import annotations

import pytest

from memory import BankConfig, PairedEvidence, RetrievalConfig, RetrievalQuery, SkillBank
from memory.paired import add_paired_evidence
from skillrl_core.errors import SkillNotFoundError


def test_utility_is_the_mean_success_difference_over_pairs():
    # 10 pairs: 6 only with it, 1 only without, 3 concordant; scores +0.5 in total.
    evidence = PairedEvidence(pairs=10, with_only=6, without_only=1, score_delta_sum=0.5)
    assert evidence.utility == pytest.approx(0.5)
    assert evidence.score_delta == pytest.approx(0.05)
    assert evidence.p_value == pytest.approx(2 * (1 + 7) / 2**7)  # exact McNemar, 1 vs 6
    assert PairedEvidence().utility == 0.0 and PairedEvidence().p_value == 1.0
    # Concordant pairs only: no difference, and the test sees nothing.
    assert PairedEvidence(pairs=8).utility == 0.0 and PairedEvidence(pairs=8).p_value == 1.0


def test_evidence_adds_up_pair_by_pair():
    total = PairedEvidence(4, 3, 0, 2.0) + PairedEvidence(6, 1, 2, -0.5)
    assert total == PairedEvidence(10, 4, 2, 1.5)


def test_stored_figures_accumulate_and_unknown_ids_write_nothing(local_bank, samples):
    entry = local_bank.add(samples.size).entry
    assert local_bank.get(entry.id).paired == PairedEvidence()
    add_paired_evidence(local_bank, {entry.id: PairedEvidence(4, 3, 0, 2.5)})
    add_paired_evidence(local_bank, {entry.id: PairedEvidence(2, 0, 1, -0.5)})
    assert local_bank.get(entry.id).paired == PairedEvidence(6, 3, 1, 2.0)
    with pytest.raises(SkillNotFoundError, match="nosuchentry"):
        add_paired_evidence(
            local_bank,
            {entry.id: PairedEvidence(1, 1, 0, 1.0), "nosuchentry": PairedEvidence(1, 0, 0, 0.0)},
        )
    assert local_bank.get(entry.id).paired == PairedEvidence(6, 3, 1, 2.0)


def test_a_withheld_entry_leaves_its_place_empty_and_is_not_counted(local_bank, samples):
    size = local_bank.add(samples.size).entry
    price = local_bank.add(samples.price).entry
    general = local_bank.add(samples.general).entry
    config = RetrievalConfig(k_general=2, k_task=1, k_mistakes=0, min_similarity=-1.0)
    query = RetrievalQuery("buy running shoes in size 9", "", env="webshop", category="footwear")
    plain = local_bank.retrieve([query], config, record=False)[0]
    assert plain.ids == [general.id, size.id]
    withheld = RetrievalQuery(
        query.instruction, "", env="webshop", category="footwear", withheld_ids=frozenset({size.id})
    )
    masked = local_bank.retrieve([withheld], config, record=True)[0]
    # The price note, next in line, does not move up into the size note's place.
    assert masked.ids == [general.id] and price.id not in masked.ids
    assert local_bank.get(size.id).times_retrieved == 0
    assert local_bank.get(general.id).times_retrieved == 1


def test_an_old_bank_migrates_to_zero_paired_figures_and_back(tmp_path, embedder, samples):
    from alembic import command
    from alembic.config import Config

    from memory.db import MIGRATIONS

    config = BankConfig(workspace=tmp_path / "old")
    with SkillBank.open(config, embedder=embedder) as bank:
        entry = bank.add(samples.size).entry
        bank.edit(entry.id, author="bob", title="Choose the right size")
        add_paired_evidence(bank, {entry.id: PairedEvidence(2, 1, 0, 1.0)})
        alembic = Config()
        alembic.set_main_option("script_location", str(MIGRATIONS))
        with bank.store.engine.begin() as connection:  # back to the schema before the figures
            alembic.attributes["connection"] = connection
            command.downgrade(alembic, "0002")
    with SkillBank.open(config, embedder=embedder) as bank:  # opening upgrades it again
        # The downgrade kept the entry's history (a table copy would have cascaded it away).
        assert len(bank.history(entry.id)) == 2
        assert bank.get(entry.id).paired == PairedEvidence()
