from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cli import main


def test_envs_lists_both_environments_as_json_and_table():
    runner = CliRunner()
    result = runner.invoke(main, ["envs", "--json"])
    assert result.exit_code == 0, result.output
    listed = {row["id"]: row["description"] for row in json.loads(result.output)}
    assert listed["webshop"].startswith("WebShop")
    assert listed["sokoban"].startswith("Sokoban")
    table = runner.invoke(main, ["envs"])
    assert table.exit_code == 0 and "webshop" in table.output and "sokoban" in table.output


def test_envs_lists_an_installed_entry_point_and_its_package(tmp_path, monkeypatch):
    info = tmp_path / "counter_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: counter-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[skillrl.envs]\ncounter = toy_env:SPEC\n")
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "envs"))  # toy_env
    monkeypatch.syspath_prepend(str(tmp_path))  # as if pip had installed counter-plugin
    result = CliRunner().invoke(main, ["envs", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["id"]: row for row in json.loads(result.output)}
    assert rows["counter"]["description"].startswith("Counter:")
    assert rows["counter"]["source"] == "entry point skillrl.envs in counter-plugin (toy_env:SPEC)"
    assert rows["webshop"]["source"] == "built-in (envs.webshop.spec)"
    table = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["envs"])
    assert "counter-plugin" in table.output and "package.module:SPEC" in table.output
