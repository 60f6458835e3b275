"""Cases: a solved training episode leaves one, a test episode never does, and the distiller's
pipeline files them beside the skills."""

from __future__ import annotations

from distill_episodes import INSTRUCTION, episode, unfinished_episode

from envs import distill_adapter_for
from skillrl.distill.cases import case_drafts
from skillrl.distill.leakage import draft_leaks

SOLVED = {"size": "large", "color": "navy"}


def test_a_solved_webshop_episode_names_its_product_and_request():
    [draft] = case_drafts([episode(success=True, chosen=SOLVED)])
    assert draft.kind == "case" and draft.env == "webshop" and draft.category == "fashion"
    assert draft.title == "A request like this was solved by click[b09qkp7xql]"
    assert draft.principle == (
        "Solved by: search[slim fit long sleeve dress shirt navy], click[b09qkp7xql], "
        "click[large], click[navy], click[buy now]"
    )
    assert draft.when_to_apply and draft.when_to_apply in INSTRUCTION
    assert "price lower than" not in draft.when_to_apply and ": " not in draft.when_to_apply
    assert draft.offers == ""  # the product page listed no option


def test_a_case_keeps_the_options_its_products_page_listed():
    solved = episode(success=True, chosen=SOLVED)
    assert solved.turns[1].action == "click[b09qkp7xql]"
    solved.turns[2].available_actions = [
        "click[back to search]", "click[< prev]", "click[description]", "click[features]",
        "click[Large]", "click[small]", "click[navy]", "click[large]", "click[buy now]",
    ]  # fmt: skip
    [draft] = case_drafts([solved])
    assert draft.offers == "large | small | navy"
    assert draft.offered == {"large", "small", "navy"}


def test_failures_unfinished_and_test_episodes_leave_no_case():
    drafts = case_drafts(
        [
            episode(success=False, chosen={"size": "small"}),
            unfinished_episode(),
            episode(success=True, chosen=SOLVED, split="test"),
        ]
    )
    assert drafts == []


def test_validation_episodes_leave_cases():
    assert len(case_drafts([episode(success=True, chosen=SOLVED, split="eval")])) == 1


def test_a_case_is_specific_on_purpose_but_never_from_a_test_episode():
    solved = episode(success=True, chosen=SOLVED)
    [draft] = case_drafts([solved])
    assert draft_leaks(draft, [solved]) == []
    held_out = episode(success=True, chosen=SOLVED, split="test")
    reasons = draft_leaks(draft, [held_out])
    assert reasons == [f"a case made from test episode {held_out.episode_id}"]


def test_sokoban_keeps_no_cases():
    assert distill_adapter_for("sokoban").case_lesson(episode(success=True, chosen=SOLVED)) is None
