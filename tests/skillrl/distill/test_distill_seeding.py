from __future__ import annotations

import json

import pytest

from memory.types import EntryDraft, RetrievalQuery
from skillrl.distill.leakage import find_leaks
from skillrl.distill.seeding import (
    general_skills_path,
    load_general_skills,
    load_starting_bank,
    seed_bank_if_empty,
    starting_bank_path,
    write_starting_bank,
)
from skillrl_core.errors import DataFileError


def test_shipped_webshop_starting_bank_loads_validates_and_is_clean():
    path = starting_bank_path("webshop")
    assert path is not None
    env, drafts = load_starting_bank(path)
    assert env == "webshop"
    kinds = {d.kind for d in drafts}
    assert kinds == {"general", "task", "mistake"}
    categories = {d.category for d in drafts if d.kind == "task"}
    assert {"fashion", "beauty", "grocery", "electronics", "furniture"} <= categories
    titles = {d.title for d in drafts if d.kind == "mistake"}
    assert {"Respect the price bound", "Select the requested size before Buy Now"} <= titles
    for draft in drafts:
        assert draft.trajectory_ids == []
        assert not find_leaks(draft.text_for_embedding()), draft.title
    regenerate = json.loads(path.read_text())["regenerate"]
    assert regenerate.startswith("skillrl bootstrap --env webshop")


def test_shipped_general_skills_are_general_clean_and_distinct():
    drafts = load_general_skills()
    assert all(d.kind == "general" and d.category is None for d in drafts)
    assert {d.env for d in drafts} == {None, "webshop", "sokoban"}
    assert len({d.title.lower() for d in drafts}) == len(drafts)
    for draft in drafts:
        assert draft.when_to_apply and not find_leaks(draft.text_for_embedding()), draft.title
    assert general_skills_path().name == "general_skills.json"
    # An environment gets its own and the environment-agnostic ones, never another's.
    for env in ("webshop", "sokoban"):
        own = load_general_skills(env=env)
        assert {d.env for d in own} == {None, env} and 4 <= len(own) <= 10
        assert {d.env for d in load_general_skills(env=env, agnostic=False)} == {env}


def test_shipped_sokoban_starting_bank_is_clean_and_says_how_it_was_made():
    env, drafts = load_starting_bank(starting_bank_path("sokoban"))
    assert env == "sokoban" and drafts and all(d.env == "sokoban" for d in drafts)
    for draft in drafts:
        assert not find_leaks(draft.text_for_embedding()), draft.title
    regenerate = json.loads(starting_bank_path("sokoban").read_text())["regenerate"]
    # The environment settings it was played under are part of the command.
    assert "--env-option categories=6x6-1box" in regenerate and "--max-turns 10" in regenerate


@pytest.mark.slow
def test_a_second_environment_is_seeded_beside_the_first_with_its_own_general_skills(bank):
    seed_bank_if_empty(bank, "webshop")
    webshop_entries = bank.count(status=None)
    report = seed_bank_if_empty(bank, "sokoban")
    own = load_general_skills(env="sokoban", agnostic=False)
    sokoban = load_starting_bank(starting_bank_path("sokoban"))[1]
    assert report is not None and report.entries == len(own) + len(sokoban)
    assert bank.count(status=None) == webshop_entries + report.added  # nothing merged away
    assert seed_bank_if_empty(bank, "sokoban") is None
    room = RetrievalQuery(
        instruction="push every box onto a target",
        observation="player at (2, 3); box at (3, 3); target at (4, 3)",
        env="sokoban",
        category="6x6-1box",
    )
    shop = RetrievalQuery(instruction="i need a navy dress shirt", observation="", env="webshop")
    in_room, in_shop = bank.retrieve([room, shop], record=False)
    assert in_room.general and {r.entry.env for r in in_room.general} <= {None, "sokoban"}
    assert in_shop.general and {r.entry.env for r in in_shop.general} <= {None, "webshop"}
    assert {r.entry.env for r in in_room.task} == {"sokoban"}


def test_a_general_skills_file_holding_a_task_skill_is_refused(tmp_path):
    path = tmp_path / "general.json"
    task = EntryDraft(kind="task", title="t", principle="p", env="webshop", category="fashion")
    write_starting_bank(path, "", [task], regenerate="x")
    with pytest.raises(DataFileError, match=r"entries\[0\] must be a general skill"):
        load_general_skills(path)


def test_no_starting_bank_for_an_unknown_env():
    assert starting_bank_path("alfworld") is None


def test_bad_starting_bank_files_are_refused_with_the_reason(tmp_path):
    path = tmp_path / "bank.json"
    path.write_text("{not json")
    with pytest.raises(DataFileError, match="cannot read starting bank"):
        load_starting_bank(path)
    good = EntryDraft(kind="task", title="t", principle="p", env="webshop", category="fashion")
    write_starting_bank(path, "webshop", [good], regenerate="x")
    data = json.loads(path.read_text())
    data["entries"][0]["principle"] = "buy B09QKP7XQL"
    path.write_text(json.dumps(data))
    with pytest.raises(DataFileError, match=r"entries\[0\] leaks .*product id"):
        load_starting_bank(path)
    data["entries"][0] = {"kind": "tip", "title": "t", "principle": "p"}
    path.write_text(json.dumps(data))
    with pytest.raises(DataFileError, match=r"entries\[0\]\.kind"):
        load_starting_bank(path)


def test_write_is_atomic_and_readable(tmp_path):
    path = tmp_path / "out" / "bank.json"
    draft = EntryDraft(kind="general", title="t", principle="p", trajectory_ids=["e1"])
    write_starting_bank(path, "webshop", [draft], regenerate="cmd")
    assert [p.name for p in path.parent.iterdir()] == ["bank.json"]
    assert path.stat().st_mode & 0o044 == 0o044
    assert "trajectory_ids" not in json.loads(path.read_text())["entries"][0]


@pytest.mark.slow
def test_empty_bank_is_seeded_once_through_the_add_api(bank):
    report = seed_bank_if_empty(bank, "webshop")
    _, drafts = load_starting_bank(starting_bank_path("webshop"))
    general = load_general_skills(env="webshop")
    from skillrl.distill.seeding import starting_cases_path

    cases = load_starting_bank(starting_cases_path("webshop"))[1]
    assert report is not None and report.entries == len(general) + len(drafts) + len(cases)
    assert bank.count() == report.added == report.entries - report.merged
    assert bank.history(bank.list()[0].id)[0].author == "seed"
    [skills] = bank.retrieve(
        [
            RetrievalQuery(
                instruction="i need a slim fit dress shirt in large, navy",
                observation="size [SEP] small [SEP] large [SEP] Buy Now",
                env="webshop",
                category="fashion",
            )
        ],
        record=False,
    )
    assert skills.task and skills.mistakes  # skills from the very first turn
    # General skills score under the similarity cut-off, yet every turn gets the best k_general.
    assert len(skills.general) == 2 and all(r.similarity < 0.25 for r in skills.general)
    assert bank.count(kind="general") >= len(general)
    assert seed_bank_if_empty(bank, "webshop") is None
    assert seed_bank_if_empty(bank, "alfworld") is None  # no starting bank ships for it
