"""Every ``skillrl`` command the README shows names a command and options that exist.

Each command line of the README's shell blocks (continuation lines joined, comments cut) is
parsed by the CLI's own click parser (options and arguments, no value converted): an option
renamed or removed, or a misspelled command, fails here instead of on a reader's screen.
Nothing runs here: ``scripts/readme_commands.py`` runs every line, each in a time box, from an
empty folder (minutes, not for CI); the last tests check that script reads the same lines and
fails on a broken one.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from cli import main

ROOT = Path(__file__).resolve().parent.parent


def _readme_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "readme_commands", ROOT / "scripts" / "readme_commands.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def readme_commands() -> list[str]:
    """The README's ``skillrl ...`` command lines, each on one line."""
    commands = []
    # The README's blocks and continuation lines, read as the script that runs them reads them.
    for joined in _readme_script().readme_blocks(ROOT / "README.md"):
        for line in joined:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split, lexer.commenters = True, "#"
            command: list[str] = []
            for word in [*lexer, "&&"]:
                if word in ("&&", "||", ";", "|", ">", ">>", "<"):  # a command ends there
                    if command and command[0] == "skillrl":
                        commands.append(" ".join(shlex.quote(w) for w in command))
                    command = [] if word != ">" else ["(redirected)"]
                elif command != ["(redirected)"]:
                    command.append(word)
    return commands


def test_the_readme_shows_the_main_commands():
    shown = {shlex.split(c)[1] for c in readme_commands() if len(shlex.split(c)) > 1}
    assert {"run", "train", "eval", "sft", "skills", "view", "runs"} <= shown


@pytest.mark.parametrize("command", readme_commands())
def test_a_readme_command_parses(command):
    words = shlex.split(command)[1:]
    group: click.Group = main
    context = click.Context(group, info_name="skillrl")
    # Walk down the subcommands (`skills measure`), then parse the options of the last one.
    while words and not words[0].startswith("-"):
        found = group.get_command(context, words[0])
        assert found is not None, f"no command {words[0]!r} in {command!r}"
        words.pop(0)
        if not isinstance(found, click.Group):
            # Options only, as the shell hands them over: values are not converted (a path in
            # the README need not exist here), but an unknown option is refused.
            own = click.Context(found, info_name=found.name, parent=context)
            _values, left, _order = found.make_parser(own).parse_args(list(words))
            takes = any(isinstance(p, click.Argument) for p in found.params)
            assert takes or not left, f"{command!r}: {found.name} takes no arguments {left}"
            return
        group = found
        context = click.Context(group, info_name=group.name, parent=context)


def test_the_runner_reads_each_readme_line_as_the_shell_would():
    script = _readme_script()
    assert script.without_comment('skillrl skills search "a #1 tea"   # comment') == (
        'skillrl skills search "a #1 tea"'
    )
    assert script.without_comment("skillrl run --env webshop # it's a comment") == (
        "skillrl run --env webshop"
    )
    block = ["skillrl run --backend openai --base-url http://127.0.0.1:8000/v1"]
    assert "server" in script.skip_reason(block, block[0], None)
    assert "WebShop" in script.skip_reason(
        ["x"], "skillrl run --env-option data_dir=~/webshop/data", None
    )
    assert ".skillrl/runs/nothing" in script.skip_reason(
        ["x"], "skillrl run --model .skillrl/runs/nothing", None
    )
    assert script.skip_reason(["x"], "skillrl runs", None) is None
    # Every command the parser test checks is part of a line the script reads.
    lines = [
        shlex.split(script.without_comment(line))
        for block in script.readme_blocks(ROOT / "README.md")
        for line in block
    ]

    def within(words, line):
        return any(line[i : i + len(words)] == words for i in range(len(line)))

    for command in readme_commands():
        assert any(within(shlex.split(command), line) for line in lines), command


def test_the_runner_passes_a_working_line_and_fails_a_broken_one(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(
        "```bash\nskillrl envs   # the environments\nskillrl nosuchcommand\n```\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "readme_commands.py"),
            "--readme",
            str(readme),
            "--folder",
            str(tmp_path / "work"),
            "--json",
            str(tmp_path / "out.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    outcomes = {o["line"]: o["verdict"] for o in json.loads((tmp_path / "out.json").read_text())}
    assert outcomes == {"skillrl envs": "passed", "skillrl nosuchcommand": "failed"}, done.stdout
    assert done.returncode == 1
    assert "FAILED: skillrl nosuchcommand" in done.stdout
