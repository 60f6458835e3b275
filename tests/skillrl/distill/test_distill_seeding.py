from __future__ import annotations

import json

import pytest

from memory.types import EntryDraft, RetrievalQuery
from skillrl.distill.leakage import find_leaks
from skillrl.distill.seeding import (
    load_starting_bank,
    seed_bank_if_empty,
    starting_bank_path,
    write_starting_bank,
)
from skillrl.errors import DataFileError


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
    assert report is not None and report.entries == len(drafts)
    assert bank.count() == report.added == len(drafts) - report.merged
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
    assert seed_bank_if_empty(bank, "webshop") is None
    assert seed_bank_if_empty(bank, "alfworld") is None
