"""Import/export: SkillRL's published bank both ways, JSONL of full records, all-or-nothing."""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skillrl_core.files
from memory import BankConfig, Entry, SkillBank, jsonl_format, skillrl_format
from skillrl_core.errors import DataFileError, ImportFormatError

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SKILLRL_BANK = SHARED / "skillrl-bank" / "webshop_skills.json"
needs_bank = pytest.mark.skipif(not SKILLRL_BANK.exists(), reason=f"{SKILLRL_BANK} is absent")


@needs_bank
def test_skillrl_bank_imports_and_exports_back_equivalent(local_bank, tmp_path):
    original = json.loads(SKILLRL_BANK.read_text())
    report = skillrl_format.import_skillrl(local_bank, SKILLRL_BANK, env="webshop")
    assert report.records == 66 and len(report.added) == 66 and report.merged == []
    assert local_bank.count(kind="general") == 15
    assert local_bank.count(kind="task") == 39 and local_bank.count(kind="mistake") == 12
    footwear = local_bank.list(kind="task", env="webshop", category="footwear")
    wanted = [s["skill_id"] for s in original["task_specific_skills"]["footwear"]]
    assert [e.external_id for e in footwear] == wanted
    out = tmp_path / "exported.json"
    skillrl_format.export_skillrl(local_bank, out, env="webshop")
    exported = json.loads(out.read_text())
    for key in ("general_skills", "task_specific_skills", "common_mistakes"):
        assert exported[key] == original[key], key
    # Importing the same bank again merges every record instead of duplicating it.
    again = skillrl_format.import_skillrl(local_bank, SKILLRL_BANK, env="webshop")
    assert len(again.merged) == 66 and local_bank.count() == 66
    assert local_bank.get(again.merged[0]).support_count == 2


def _state(bank: SkillBank) -> list[dict]:
    return [dataclasses.asdict(e) for e in bank.list(status=None)]


def test_jsonl_moves_full_records_between_banks(local_bank, tmp_path, embedder, samples):
    size = local_bank.add(samples.size).entry
    local_bank.add(samples.mistake)
    local_bank.edit(size.id, author="bob", title="Choose the right size")
    retired = local_bank.add(samples.general).entry
    local_bank.retire(retired.id, author="bob")
    path = tmp_path / "bank.jsonl"
    assert jsonl_format.export_jsonl(local_bank, path) == 3
    with SkillBank.open(BankConfig(workspace=tmp_path / "other"), embedder=embedder) as other:
        report = jsonl_format.import_jsonl(other, path)
        assert len(report.added) == 3
        assert _state(other) == _state(local_bank)
        assert other.check().ok and other.count() == 2  # the retired entry is not indexed
        with pytest.raises(ImportFormatError, match="already in the bank"):
            jsonl_format.import_jsonl(other, path)


def test_a_malformed_jsonl_line_is_reported_and_nothing_is_written(local_bank, tmp_path, samples):
    local_bank.add(samples.size)
    path = tmp_path / "bank.jsonl"
    jsonl_format.export_jsonl(local_bank, path)
    good = json.loads(path.read_text().splitlines()[0])
    lines = [
        json.dumps({**good, "id": "a" * 32}),
        json.dumps({**good, "id": "b" * 32, "title": "x"}),
        json.dumps({**good, "id": "c" * 32, "kind": "bogus"}),
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImportFormatError, match=r"bad.jsonl:3: .*kind"):
        jsonl_format.import_jsonl(local_bank, bad)
    bad.write_text(lines[0] + "\n{not json\n")
    with pytest.raises(ImportFormatError, match=r"bad.jsonl:2: not valid JSON"):
        jsonl_format.import_jsonl(local_bank, bad)
    assert local_bank.count(status=None) == 1 and local_bank.check().ok


@needs_bank
def test_a_malformed_skillrl_record_is_reported_with_its_path(local_bank, tmp_path):
    data = json.loads(SKILLRL_BANK.read_text())
    del data["task_specific_skills"]["apparel"][2]["principle"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ImportFormatError, match=r"task_specific_skills\.apparel\[2\]\.principle"):
        skillrl_format.import_skillrl(local_bank, bad, env="webshop")
    data = json.loads(SKILLRL_BANK.read_text())
    data["common_mistakes"][4] = "just a string"
    bad.write_text(json.dumps(data))
    with pytest.raises(ImportFormatError, match=r"common_mistakes\[4\]"):
        skillrl_format.import_skillrl(local_bank, bad, env="webshop")
    assert local_bank.count(status=None) == 0 and local_bank.check().ok


def test_exports_are_written_atomically(local_bank, tmp_path, samples, monkeypatch):
    local_bank.add(samples.size)
    path = tmp_path / "bank.jsonl"
    path.write_text("previous export\n")

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(skillrl_core.files.os, "replace", crash)
    with pytest.raises(DataFileError, match="disk full"):
        jsonl_format.export_jsonl(local_bank, path)
    assert path.read_text() == "previous export\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),  # fmt: skip
    max_leaves=6,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(field=st.sampled_from([f.name for f in dataclasses.fields(Entry)]), value=JSON_VALUES,
       data=st.data())  # fmt: skip
def test_any_value_in_any_jsonl_field_is_imported_or_refused_cleanly(
    local_bank, tmp_path, samples, field, value, data
):
    if local_bank.count(status=None) == 0:
        local_bank.add(samples.size)
    record = json.loads(json.dumps(dataclasses.asdict(local_bank.list()[0])))
    record.update(id=uuid.uuid4().hex, title=f"Imported {uuid.uuid4().hex}")
    record[field] = value
    path = tmp_path / f"{uuid.uuid4().hex}.jsonl"
    path.write_text(json.dumps(record) + "\n")
    before = local_bank.count(status=None)
    try:
        report = jsonl_format.import_jsonl(local_bank, path)
    except ImportFormatError as e:
        assert f"{path}:1:" in str(e)
        assert local_bank.count(status=None) == before
    else:
        assert report.added == [record["id"]]
        assert local_bank.get(record["id"]).kind == record["kind"]
