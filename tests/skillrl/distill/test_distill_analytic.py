from __future__ import annotations

import re

import pytest
from distill_episodes import episode, unfinished_episode

from envs.webshop.distill_adapter import option_kind
from skillrl.distill.analytic import AnalyticConfig, AnalyticDistiller
from skillrl.distill.leakage import draft_leaks

ASIN = re.compile(r"\bb0[0-9a-z]{8}\b", re.IGNORECASE)
PRICE = re.compile(r"\$|\d+\.\d\d|dollars")


def _text(draft) -> str:
    return " ".join(
        [
            draft.title,
            draft.principle,
            draft.when_to_apply,
            draft.failure_point,
            draft.flawed_action,
            draft.correction,
        ]
    )


def test_wrong_size_yields_a_note_about_selecting_the_requested_size():
    failed = episode(
        success=False, chosen={"size": "medium", "color": "navy"}, missed_options=["large"]
    )
    [note] = AnalyticDistiller().distill([failed])
    assert note.kind == "mistake"
    assert (note.env, note.category) == ("webshop", "fashion")
    assert "size" in note.title.lower()
    assert note.failure_point == "chose size medium while the goal asked for large"
    assert note.correction == "click the size the instruction names (here large), then buy now"
    assert "before clicking buy now" in note.principle.lower()
    assert note.trajectory_ids == [failed.episode_id]
    assert draft_leaks(note, [failed]) == []


def test_missing_option_selection_is_named_as_such():
    failed = episode(success=False, chosen={"color": "navy"}, missed_options=["large"])
    [note] = AnalyticDistiller().distill([failed])
    assert note.failure_point == "bought without selecting the requested size (large)"


def test_over_the_price_bound_yields_a_price_note_without_literal_prices():
    failed = episode(success=False, chosen={"size": "large", "color": "navy"}, price_ok=False)
    [note] = AnalyticDistiller().distill([failed])
    assert note.kind == "mistake"
    assert "price bound" in note.title.lower()
    assert "price" in note.principle.lower() and "bound" in note.principle.lower()
    assert not PRICE.search(_text(note))


def test_several_causes_give_several_notes_in_decisive_order_and_capped():
    failed = episode(
        success=False,
        chosen={"size": "medium", "color": "navy"},
        missed_options=["large"],
        price_ok=False,
        r_type=0.5,
        missed_attributes=["long sleeve"],
    )
    titles = [d.title for d in AnalyticDistiller().distill([failed])]
    assert titles == [
        "Buy the requested product type",
        "Select the requested size before Buy Now",
        "Respect the price bound",
    ]
    one = AnalyticDistiller(AnalyticConfig(max_notes_per_failure=1)).distill([failed])
    assert [d.title for d in one] == ["Buy the requested product type"]


def test_success_yields_a_task_skill_with_no_product_id_or_price():
    won = episode(success=True, chosen={"size": "large", "color": "navy"})
    assert ASIN.search(" ".join(t.action for t in won.turns))  # the trajectory has one
    [skill] = AnalyticDistiller().distill([won])
    assert skill.kind == "task" and skill.category == "fashion"
    text = _text(skill)
    assert not ASIN.search(text) and not PRICE.search(text)
    assert "color, size" in skill.principle and "buy now" in skill.principle.lower()
    assert draft_leaks(skill, [won]) == []


def test_notes_of_one_lesson_fold_into_one_draft_listing_every_episode():
    failures = [
        episode(success=False, chosen={"size": "medium"}, missed_options=["large"]),
        episode(success=False, chosen={"size": "small"}, missed_options=["x-large"]),
        episode(success=False, chosen={"size": "large", "color": "black"}, missed_options=["navy"]),
    ]
    size, color = AnalyticDistiller().distill(failures)
    assert size.failure_point == "chose size medium while the goal asked for large"
    assert size.trajectory_ids == [failures[0].episode_id, failures[1].episode_id]
    assert size.reason == "2 failed episodes in fashion"
    assert color.title == "Select the requested color before Buy Now"


def test_identical_patterns_fold_and_cross_category_patterns_become_general():
    wins = [episode(success=True, chosen={"size": "large", "color": "navy"}) for _ in range(3)]
    wins.append(episode(success=True, chosen={"size": "large", "color": "navy"}, category="beauty"))
    drafts = AnalyticDistiller().distill(wins)
    by_kind = {}
    for d in drafts:
        by_kind.setdefault(d.kind, []).append(d)
    assert sorted((d.category, len(d.trajectory_ids)) for d in by_kind["task"]) == [
        ("beauty", 1),
        ("fashion", 3),
    ]
    [general] = by_kind["general"]
    assert general.env is None and general.category is None
    assert len(general.trajectory_ids) == 4
    assert "beauty, fashion" in general.reason


def test_one_category_never_makes_a_general_skill():
    wins = [episode(success=True, chosen={"size": "large"}) for _ in range(3)]
    assert {d.kind for d in AnalyticDistiller().distill(wins)} == {"task"}


def test_an_episode_that_never_bought_gets_a_loop_note():
    [note] = AnalyticDistiller().distill([unfinished_episode()])
    assert note.kind == "mistake"
    assert note.flawed_action == "repeated click[next >] 14 times"
    assert "15 turns" in note.failure_point


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("large", "size"),
        ("x-large", "size"),
        ("m", "size"),
        ("8.5", "size"),
        ("32w x 30l", "size"),
        ("navy blue", "color"),
        ("pack of 2", "option"),
    ],
)
def test_option_kind(value, kind):
    assert option_kind(value) == kind


def test_config_is_validated():
    with pytest.raises(ValueError, match="max_notes_per_failure"):
        AnalyticConfig(max_notes_per_failure=0)
