from __future__ import annotations

import json

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
