"""The one atomic writer: readable results, no half-written files, errors that name the path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from skillrl_core.errors import DataFileError
from skillrl_core.files import atomic_write_json, atomic_write_text


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_written_files_get_the_permissions_a_plain_open_would(tmp_path, umask_022):
    target = tmp_path / "bank.json"
    atomic_write_text(target, "x\n")
    plain = tmp_path / "plain.txt"
    plain.write_text("x\n")
    assert target.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777 == 0o644


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "state.json"
    target.write_text("old\n")

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(DataFileError, match="state.json.*No space left"):
        atomic_write_text(target, "new\n")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_missing_folder_is_created_or_refused_by_name(tmp_path):
    nested = tmp_path / "runs" / "a" / "config.json"
    atomic_write_json(nested, {"b": 1, "a": "é"})
    assert json.loads(nested.read_text(encoding="utf-8")) == {"a": "é", "b": 1}
    typo = tmp_path / "exprots" / "bank.jsonl"
    with pytest.raises(DataFileError, match="exprots.*does not exist"):
        atomic_write_text(typo, "{}\n", create_folder=False)
    assert not typo.parent.exists()


def test_a_path_that_is_a_folder_is_an_error_that_names_it(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(DataFileError, match="out"):
        atomic_write_text(folder, "x")
    assert list(folder.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_json_is_sorted_unless_asked_and_ends_with_a_newline(tmp_path):
    path = Path(tmp_path / "a.json")
    atomic_write_json(path, {"z": 1, "a": 2}, sort_keys=False, indent=1)
    text = path.read_text()
    assert text.endswith("}\n") and text.index('"z"') < text.index('"a"')


def test_read_json_object_names_the_file_for_every_kind_of_damage(tmp_path):
    import pytest

    from skillrl_core.errors import DataFileError
    from skillrl_core.files import read_json_object

    cases = {
        "missing.json": (None, "cannot read"),
        "list.json": (b"[1]", "must hold a JSON object, not list"),
        "binary.json": (b"\xff\x00\x01", "is not UTF-8 text"),
        "bad.json": (b"{", "is not valid JSON"),
        "deep.json": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / name
        if content is not None:
            path.write_bytes(content)
        with pytest.raises(DataFileError, match=message) as raised:
            read_json_object(path)
        assert str(path) in str(raised.value)
    (tmp_path / "ok.json").write_text('{"a": 1}')
    assert read_json_object(tmp_path / "ok.json") == {"a": 1}


def test_int_fields_refuse_what_is_not_an_integer():
    from dataclasses import dataclass

    import pytest

    from skillrl_core.errors import ConfigError
    from skillrl_core.validation import check_finite_fields

    @dataclass
    class Config:
        count: int = 1
        limit: int | None = None

        def __post_init__(self) -> None:
            check_finite_fields(self)

    assert Config(3, None).count == 3
    for bad in ({"count": 1.5}, {"count": "abc"}, {"count": True}, {"limit": 2.0}):
        with pytest.raises(ConfigError, match="must be an integer"):
            Config(**bad)
