"""Cases in the bank: retrieved by the request alone, merged only with the same request, and
served by placebo and mixed retrieval like every other kind."""

from __future__ import annotations

import dataclasses

import pytest

from memory import BankConfig, EntryDraft, SkillBank
from memory.config import RetrievalConfig
from memory.placebo import DonorTask, MixedRetrieval, PlaceboRetrieval
from memory.types import RetrievalQuery, offers_text
from skillrl_core.errors import ConfigError, InvalidEntryError


def case(request: str, product: str, category: str) -> EntryDraft:
    return EntryDraft(
        kind="case",
        title=f"A request like this was solved by click[{product}]",
        principle=f"Solved by: click[{product}], click[buy now]",
        when_to_apply=request,
        env="webshop",
        category=category,
    )


TEA = case("i need individually wrapped herbal tea that is organic", "b0tea00001", "grocery")
TEA_AGAIN = case("i need individually wrapped herbal tea that is organic", "b0tea00002", "grocery")
SHOES = case("i want men's running shoes which are non slip", "b0shoe0001", "fashion")
LAMP = case("i am looking for a dimmable led desk lamp", "b0lamp0001", "electronics")

RESULTS_PAGE = "Page 1 (Total results: 50) [SEP] Next > [SEP] B0TEA00001 [SEP] Herbal Tea"


def query(instruction: str, category: str, observation: str = RESULTS_PAGE) -> RetrievalQuery:
    return RetrievalQuery(instruction, observation, "webshop", category)


@pytest.fixture
def case_bank(tmp_path, embedder):
    with SkillBank.open(BankConfig(workspace=tmp_path / "bank"), embedder=embedder) as bank:
        bank.add_many([TEA, SHOES, LAMP], author="test")
        yield bank


def test_a_case_embeds_its_request_alone():
    assert TEA.text_for_embedding() == TEA.when_to_apply


def test_the_case_of_the_same_request_is_retrieved_whatever_the_page(case_bank):
    tea = "i need individually wrapped herbal tea that is organic with flavor: ginger, and size: "
    asks = [
        query(tea + "40 count, and price lower than 50.00 dollars", "grocery"),
        query(tea + "100 count", "grocery", observation="WebShop [SEP] Search"),
        query("i want men's running shoes which are non slip with size: 10", "fashion"),
    ]
    found = case_bank.retrieve(asks, RetrievalConfig(k_cases=1), record=False)
    titles = [[r.entry.title for r in f.cases] for f in found]
    assert titles == [[TEA.title], [TEA.title], [SHOES.title]]


def test_no_case_without_k_cases(case_bank):
    found = case_bank.retrieve([query(TEA.when_to_apply, "grocery")], RetrievalConfig(k_cases=0))
    assert found[0].cases == []


def test_a_case_merges_only_into_the_same_request_solved_by_the_same_product(case_bank):
    same = case(TEA.when_to_apply, "b0tea00001", "grocery")
    assert case_bank.add_many([same], author="test")[0].merged  # one case, its support grows
    # The same request solved by another product is another case (retrieval then serves the
    # one that comes in what a later request wants).
    assert not case_bank.add_many([TEA_AGAIN], author="test")[0].merged
    other = case(
        "i need individually wrapped herbal tea bags that are caffeine free", "b0x", "grocery"
    )
    distinct = case_bank.add_many([other], author="test")[0]
    assert not distinct.merged  # a similar but different request is another case
    assert {e.kind for e in case_bank.list()} == {"case"}
    assert len([e for e in case_bank.list() if e.when_to_apply == TEA.when_to_apply]) == 2


def offering(draft: EntryDraft, *values: str) -> EntryDraft:
    return dataclasses.replace(draft, offers=offers_text(values))


GINGER_TEA = TEA.when_to_apply + " with flavor: ginger, and size: "


def test_of_one_requests_cases_the_one_that_comes_in_what_is_wanted_is_served(tmp_path, embedder):
    lemon = offering(TEA, "lemon", "20 count")
    ginger = offering(TEA_AGAIN, "Ginger", "40 count", "100 count")
    with SkillBank.open(BankConfig(workspace=tmp_path / "bank"), embedder=embedder) as bank:
        bank.add_many([lemon, ginger, SHOES], author="test")
        asks = [
            dataclasses.replace(query(GINGER_TEA + "40 count", "grocery"), wants=wanted)
            for wanted in (("ginger", "40 count"), ("lemon",), ("ginger", "20 count"), ())
        ]
        found = bank.retrieve(asks, RetrievalConfig(k_cases=1), record=False)
    titles = [[r.entry.title for r in f.cases] for f in found]
    # Both offer what is wanted, or neither does: the same order as without wants.
    assert titles == [[TEA_AGAIN.title], [TEA.title], [TEA.title], [TEA.title]]


def test_tied_cases_go_to_the_best_supported_and_unknown_offers_are_not_held_against(
    tmp_path, embedder
):
    known = offering(TEA, "lemon")
    unknown = TEA_AGAIN  # no offers recorded (a bank written before offers were kept)
    with SkillBank.open(BankConfig(workspace=tmp_path / "bank"), embedder=embedder) as bank:
        bank.add_many([known, unknown, unknown], author="test")  # the second one merged twice
        wanted = dataclasses.replace(query(GINGER_TEA + "40 count", "grocery"), wants=("ginger",))
        plain = query(GINGER_TEA + "40 count", "grocery")
        found = bank.retrieve([wanted, plain], RetrievalConfig(k_cases=1), record=False)
    assert [f.cases[0].entry.title for f in found] == [TEA_AGAIN.title, TEA_AGAIN.title]


def test_offers_belong_to_cases_only(case_bank):
    skill = EntryDraft(
        kind="general", title="Check options", principle="Pick every option asked for.",
        offers="red",
    )  # fmt: skip
    with pytest.raises(InvalidEntryError, match="offers is for cases only"):
        case_bank.add_many([skill], author="test")


def test_a_placebo_asks_with_its_donors_wants_never_the_episodes_own(case_bank):
    donor = DonorTask(LAMP.when_to_apply, "electronics", ("white",))
    own = dataclasses.replace(query(GINGER_TEA + "40 count", "grocery"), wants=("ginger",))
    placebo = PlaceboRetrieval(case_bank, [donor])
    assert placebo._donor_query(own).wants == ("white",)
    assert placebo.retrieve([own], RetrievalConfig(k_cases=1))[0].cases[0].entry.title == (
        LAMP.title
    )


def test_placebo_serves_another_goals_case_never_the_own_one(case_bank):
    asks = [query(TEA.when_to_apply + " with flavor: ginger", "grocery")]
    own = case_bank.retrieve(asks, RetrievalConfig(k_cases=1), record=False)
    placebo = PlaceboRetrieval(case_bank, [DonorTask(LAMP.when_to_apply, "electronics")])
    served = placebo.retrieve(asks, RetrievalConfig(k_cases=1))
    assert len(served[0].cases) == len(own[0].cases) == 1
    assert served[0].cases[0].entry.id != own[0].cases[0].entry.id
    assert served[0].cases[0].entry.title == LAMP.title


def test_mixed_retrieval_fixes_the_arm_per_episode_and_draws_each(case_bank):
    placebo = PlaceboRetrieval(case_bank, [DonorTask(LAMP.when_to_apply, "electronics")])
    mixed = MixedRetrieval(case_bank, placebo, withhold=0.3, placebo_fraction=0.3, seed=1)
    asks = [query(f"i need organic herbal tea number {i}", "grocery") for i in range(60)]
    arms = [mixed.arm_of(q) for q in asks]
    assert set(arms) == {"own", "none", "placebo"}
    config = RetrievalConfig(k_cases=1)
    first = mixed.retrieve(asks, config)
    again = mixed.retrieve(list(reversed(asks)), config)[::-1]
    assert [r.ids for r in first] == [r.ids for r in again]
    for arm, result in zip(arms, first, strict=True):
        if arm == "none":
            assert result.all == []
        elif arm == "placebo":
            assert [r.entry.title for r in result.cases] == [LAMP.title]
        else:
            assert [r.entry.title for r in result.cases] == [TEA.title]


@pytest.mark.parametrize(("withhold", "placebo"), [(-0.1, 0.0), (0.6, 0.5), (0.0, 1.0)])
def test_mixed_retrieval_refuses_fractions_that_leave_no_own_episode(case_bank, withhold, placebo):
    donors = PlaceboRetrieval(case_bank, [DonorTask(LAMP.when_to_apply, "electronics")])
    with pytest.raises(ConfigError, match="withhold"):
        MixedRetrieval(case_bank, donors, withhold=withhold, placebo_fraction=placebo)


def test_a_bank_from_before_offers_migrates_to_cases_whose_offers_are_not_known(tmp_path, embedder):
    from alembic import command
    from alembic.config import Config

    from memory.db import MIGRATIONS

    config = BankConfig(workspace=tmp_path / "old")
    with SkillBank.open(config, embedder=embedder) as bank:
        entry = bank.add(offering(TEA, "lemon")).entry
        assert bank.get(entry.id).offered == {"lemon"}
        alembic = Config()
        alembic.set_main_option("script_location", str(MIGRATIONS))
        with bank.store.engine.begin() as connection:  # back to the schema before offers
            alembic.attributes["connection"] = connection
            command.downgrade(alembic, "0003")
    with SkillBank.open(config, embedder=embedder) as bank:  # opening upgrades it again
        assert bank.get(entry.id).offers == "" and len(bank.history(entry.id)) == 1
        edited = bank.edit(entry.id, author="bob", offers="lemon | ginger")
        assert edited.offered == {"lemon", "ginger"}


RED_SHOES = "i want men's running shoes which are non slip and arch support"
RED_SHOES_NEARBY = "i want men's running shoes which are arch support and breathable"


def test_a_near_request_whose_product_fits_beats_the_nearest_within_the_margin(tmp_path, embedder):
    nearest = offering(case(RED_SHOES, "b0shoe0001", "fashion"), "blue", "8")
    nearby = offering(case(RED_SHOES_NEARBY, "b0shoe0002", "fashion"), "red", "8")
    with SkillBank.open(BankConfig(workspace=tmp_path / "bank"), embedder=embedder) as bank:
        bank.add_many([nearest, nearby, LAMP], author="test")
        ask = dataclasses.replace(
            query(RED_SHOES + " with color: red, and size: 8", "fashion"), wants=("red", "8")
        )
        ranked = bank.retrieve([ask], RetrievalConfig(k_cases=2, case_fit_margin=0), record=False)
        first, second = ranked[0].cases
        assert first.entry.title == nearest.title  # nearest by the request's words
        gap = first.similarity - second.similarity
        assert gap > 0

        def served(margin: float, wants: tuple[str, ...] = ("red", "8")) -> str:
            config = RetrievalConfig(k_cases=1, case_fit_margin=margin)
            asked = dataclasses.replace(ask, wants=wants)
            return bank.retrieve([asked], config, record=False)[0].cases[0].entry.title

        assert served(gap + 0.01) == nearby.title  # within reach, and it comes in red
        assert served(gap / 2) == nearest.title  # out of reach: the nearest stays
        assert served(0) == nearest.title
        assert served(gap + 0.01, wants=("blue",)) == nearest.title  # the nearest fits
        assert served(gap + 0.01, wants=()) == nearest.title  # nothing wanted: by words alone


def test_within_the_margin_a_case_whose_offers_are_not_known_is_not_passed_over(tmp_path, embedder):
    nearest = case(RED_SHOES, "b0shoe0001", "fashion")  # offers not known
    nearby = offering(case(RED_SHOES_NEARBY, "b0shoe0002", "fashion"), "red")
    with SkillBank.open(BankConfig(workspace=tmp_path / "bank"), embedder=embedder) as bank:
        bank.add_many([nearest, nearby], author="test")
        ask = dataclasses.replace(query(RED_SHOES + " with color: red", "fashion"), wants=("red",))
        found = bank.retrieve([ask], RetrievalConfig(k_cases=1, case_fit_margin=2.0), record=False)
    assert found[0].cases[0].entry.title == nearest.title


@pytest.mark.parametrize("margin", [-0.01, 2.5, float("nan")])
def test_a_fit_margin_out_of_range_is_refused_by_name(margin):
    with pytest.raises(ConfigError, match="case_fit_margin|finite"):
        RetrievalConfig(case_fit_margin=margin)
