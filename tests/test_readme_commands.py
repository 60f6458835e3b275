"""Every ``skillrl`` command the README shows names a command and options that exist.

Each command line of the README's shell blocks (continuation lines joined, comments cut) is
parsed by the CLI's own click parser (options and arguments, no value converted): an option
renamed or removed, or a misspelled command, fails here instead of on a reader's screen.
Nothing runs.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click
import pytest

from cli import main

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    """The README's ``skillrl ...`` command lines, each on one line."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in text.split("```bash\n")[1:]:
        lines = block.split("```")[0].splitlines()
        joined: list[str] = []
        for line in lines:
            if joined and joined[-1].endswith("\\"):
                joined[-1] = joined[-1][:-1] + " " + line.strip()
            else:
                joined.append(line.strip())
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
