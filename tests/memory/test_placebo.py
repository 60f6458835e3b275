"""Placebo retrieval: the same count of entries, drawn for another goal, none of the goal's own."""

from __future__ import annotations

import pytest

from memory import BankConfig, SkillBank
from memory.placebo import DonorTask, PlaceboRetrieval
from memory.types import RetrievalQuery
from skillrl.distill.seeding import seed_bank_if_empty
from skillrl_core.errors import ConfigError

ITEM_PAGE = (
    "Back to Search | < Prev | size: small, medium, large | color: black, grey | "
    "Men's Running Shoe | Price: $45.99 | Rating: N.A. | Description | Buy Now"
)
QUERIES = [
    RetrievalQuery(
        "i want grey running shoes for men in size 10, price lower than 50.00 dollars",
        ITEM_PAGE,
        "webshop",
        "fashion",
    ),
    RetrievalQuery(
        "i need organic herbal tea with flavor ginger, 40 count, price lower than 20.00 dollars",
        "[button] Search [button_]",
        "webshop",
        "grocery",
    ),
    RetrievalQuery(
        "i am looking for a wireless keyboard in black, price lower than 40.00 dollars",
        "Results page 1 | B0ABC | Wireless Keyboard | $29.99",
        "webshop",
        "electronics",
    ),
]
DONORS = [
    DonorTask("i want a scented body lotion for dry skin, 16 ounce", "beauty"),
    DonorTask("i need a wooden coffee table in walnut color", "furniture"),
    DonorTask("i want grey running shoes for women, size 8", "fashion"),
]


@pytest.fixture
def seeded(tmp_path, embedder):
    with SkillBank.open(BankConfig(workspace=tmp_path / "bank"), embedder=embedder) as bank:
        seed_bank_if_empty(bank, "webshop")
        yield bank


def test_same_count_never_own_and_not_recorded(seeded):
    before = {e.id: e.times_retrieved for e in seeded.list()}
    placebo = PlaceboRetrieval(seeded, DONORS)
    own = seeded.retrieve(QUERIES, record=False)
    served = placebo.retrieve(QUERIES, record=True)
    for query, mine, theirs in zip(QUERIES, own, served, strict=True):
        assert len(theirs.all) == len(mine.all) > 0
        assert not set(theirs.ids) & set(mine.ids)
        assert len(set(theirs.ids)) == len(theirs.ids)
        assert placebo.donor_for(query).category != query.category
    assert placebo.shortfall == 0
    assert {e.id: e.times_retrieved for e in seeded.list()} == before


def test_kinds_match_where_the_bank_allows(seeded):
    placebo = PlaceboRetrieval(seeded, DONORS)
    own = seeded.retrieve(QUERIES, record=False)
    served = placebo.retrieve(QUERIES)
    for mine, theirs in zip(own, served, strict=True):
        assert len(theirs.task) == len(mine.task)


def test_the_donor_is_fixed_per_episode(seeded):
    placebo = PlaceboRetrieval(seeded, DONORS)
    first = placebo.retrieve(QUERIES)
    again = placebo.retrieve(QUERIES)
    assert [r.ids for r in first] == [r.ids for r in again]


def test_no_donor_is_refused(seeded):
    with pytest.raises(ConfigError, match="donor"):
        PlaceboRetrieval(seeded, [])
    lone = PlaceboRetrieval(seeded, [DonorTask(QUERIES[0].instruction, "fashion")])
    with pytest.raises(ConfigError, match="other than"):
        lone.retrieve(QUERIES[:1])
    # An environment whose training goals are all one task (Sokoban's one instruction in one
    # category) is refused up front: every episode of it would be its own donor.
    one_task = [DonorTask("Push every box onto a target.", "6x6-1box")] * 3
    assert not PlaceboRetrieval.possible(one_task) and PlaceboRetrieval.possible(DONORS)
    with pytest.raises(ConfigError, match="differ in instruction or category"):
        PlaceboRetrieval.check(one_task)
