"""SkillRL's categories are mapped to the environment's on import and restored on export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import envs
from cli import main
from envs.webshop.categories import CATEGORIES, SKILLRL_CATEGORIES
from memory import BankConfig, RetrievalConfig, RetrievalQuery, SkillBank, skillrl_format
from skillrl_cli.category_maps import (
    category_map_for,
    category_map_from,
    parse_category_pair,
)
from skillrl_core.errors import ConfigError, DataFileError

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SKILLRL_BANK = SHARED / "skillrl-bank" / "webshop_skills.json"
needs_bank = pytest.mark.skipif(not SKILLRL_BANK.exists(), reason=f"{SKILLRL_BANK} is absent")


@needs_bank
def test_mapped_import_serves_task_skills_and_export_gives_back_the_original(local_bank, tmp_path):
    original = json.loads(SKILLRL_BANK.read_text())
    table = envs.skillrl_categories("webshop")
    report = skillrl_format.import_skillrl(
        local_bank, SKILLRL_BANK, env="webshop", category_map=table
    )
    assert report.records == 66 and len(report.added) == 66  # no skill merged into another
    tasks = local_bank.list(kind="task")
    assert {e.category for e in tasks} == set(CATEGORIES)
    assert local_bank.list(kind="task", category="apparel") == []
    footwear = [e for e in tasks if skillrl_format.skillrl_category(e) == "footwear"]
    assert [e.external_id for e in footwear] == [
        s["skill_id"] for s in original["task_specific_skills"]["footwear"]
    ]
    assert {e.category for e in footwear} == {"fashion"}
    assert {e.source for e in footwear} == {"import:skillrl:footwear"}
    assert "'footwear' imported as 'fashion'" in footwear[0].reason
    # A WebShop fashion goal now gets SkillRL's task skills (unmapped, it got none).
    query = RetrievalQuery(
        instruction="i need a pair of men's running shoes in size 10, black",
        observation="WebShop [SEP] Search",
        env="webshop",
        category="fashion",
    )
    [skills] = local_bank.retrieve([query], RetrievalConfig(), record=False)
    assert skills.task and all(r.entry.source.startswith("import:skillrl") for r in skills.task)
    # Export files each task skill back under its SkillRL category: the original file again.
    out = tmp_path / "exported.json"
    skillrl_format.export_skillrl(local_bank, out, env="webshop")
    exported = json.loads(out.read_text())
    for key in ("general_skills", "task_specific_skills", "common_mistakes"):
        assert exported[key] == original[key], key


def test_a_skill_whose_category_is_not_in_the_table_keeps_it():
    data = {
        "task_specific_skills": {
            "apparel": [{"skill_id": "a1", "title": "t", "principle": "p"}],
            "toys": [{"skill_id": "t1", "title": "u", "principle": "q"}],
        }
    }
    drafts = skillrl_format.parse_skillrl(
        data, env="webshop", source="import:skillrl", category_map={"apparel": "fashion"}
    )
    assert [(d.category, d.source) for d in drafts] == [
        ("fashion", "import:skillrl:apparel"),
        ("toys", "import:skillrl"),
    ]


def test_the_webshop_table_maps_every_skillrl_category_onto_a_webshop_one():
    from envs.webshop.catalog_vocab import TYPES

    assert set(CATEGORIES) == {t.category for t in TYPES}
    assert set(SKILLRL_CATEGORIES.values()) <= set(CATEGORIES)
    assert envs.skillrl_categories("webshop") == SKILLRL_CATEGORIES
    assert envs.skillrl_categories("no-such-env") == {}


def test_the_table_comes_from_the_env_a_file_or_pairs(tmp_path):
    assert category_map_for("webshop", None, [])["apparel"] == "fashion"
    table = category_map_for("webshop", None, ["apparel = beauty", "toys=grocery"])
    assert table["apparel"] == "beauty" and table["toys"] == "grocery"
    path = tmp_path / "map.yaml"
    path.write_text("apparel: fashion\nother: grocery\n")
    assert category_map_for("webshop", path, ["other=beauty"]) == {
        "apparel": "fashion",
        "other": "beauty",
    }
    path.write_text("")  # an empty file: no mapping at all
    assert category_map_for("webshop", path, []) == {}
    for bad in ("- apparel\n", "apparel: [fashion]\n", "1: fashion\n", "apparel: ''\n", "a: [\n"):
        path.write_text(bad)
        with pytest.raises(DataFileError, match="map.yaml"):
            category_map_for("webshop", path, [])


@given(st.text())
def test_a_pair_parses_only_as_old_equals_new(text):
    try:
        old, new = parse_category_pair(text)
    except ConfigError as e:
        assert "OLD=NEW" in str(e)
        assert text.count("=") != 1 or not all(p.strip() for p in text.split("="))
    else:
        assert text.count("=") == 1 and f"{old}={new}" == "=".join(
            p.strip() for p in text.split("=")
        )
        assert old and new and old == old.strip() and new == new.strip()


@given(st.dictionaries(st.text(), st.one_of(st.text(), st.integers(), st.none())))
def test_a_parsed_file_is_accepted_only_as_names_to_names(data):
    try:
        table = category_map_from(data, "map.yaml")
    except DataFileError as e:
        assert str(e).startswith("map.yaml: ")
        assert any(not (isinstance(v, str) and v.strip() and k.strip()) for k, v in data.items())
    else:
        assert table == {k.strip(): v.strip() for k, v in data.items()}
        assert all(k and v for k, v in table.items())


@needs_bank
def test_cli_import_maps_categories_and_reports_the_table(tmp_path, embedder):
    workspace = tmp_path / "ws"
    args = ["skills", "import", str(SKILLRL_BANK), "--workspace", str(workspace)]
    result = CliRunner().invoke(main, [*args, "--map-category", "other=beauty", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["category_map"] == {**SKILLRL_CATEGORIES, "other": "beauty"}
    with SkillBank.open(BankConfig(workspace=workspace), embedder=embedder) as bank:
        other = [e for e in bank.list(kind="task") if skillrl_format.skillrl_category(e) == "other"]
        assert len(other) == 6 and {e.category for e in other} == {"beauty"}
    bad = CliRunner().invoke(main, [*args, "--map-category", "apparel"])
    assert bad.exit_code != 0 and "OLD=NEW" in bad.output and "Traceback" not in bad.output
