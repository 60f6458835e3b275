"""Bank text is shown as text: never read as rich markup, control characters made visible.

The property test renders entries through what ``skills show``, ``list`` and ``search`` print
(:mod:`skillrl_cli.skills_view`); the CLI tests run the commands on a bank holding such text.
"""

from __future__ import annotations

import contextlib
import io
import re
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_skills_cli import cli_bank, run, template_bank  # noqa: F401 - fixtures

from memory.types import Entry, RetrievedEntry, RetrievedSkills
from skillrl_cli import skills_view
from skillrl_core.text import hidden_character, visible

ESCAPE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""A control character (ESC, CSI, BEL, ...) in what was printed: an escape sequence could start."""


def printed(render, *args) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        render(*args)
    return out.getvalue()


def entry(text: str) -> Entry:
    return Entry(kind="general", title=text, principle=text, when_to_apply=text, id="e" * 32)


def assert_shown_literally(text: str, output: str) -> None:
    assert not ESCAPE.search(output), repr(output)
    assert "\u202e" not in output and "\u2066" not in output
    for character in visible(text):
        if not character.isspace():
            assert character in output, (character, output)


# At most 2 x 30 characters: `skills list` and `search` cut a title at 60 (with "…").
texts = st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30)
markup = st.sampled_from(["[/oops]", "click[buy now]", "[link=http://x]y[/link]", "[bold]", "\\["])


@settings(max_examples=150, deadline=None)
@given(text=st.lists(st.one_of(texts, markup), min_size=1, max_size=2).map("".join))
def test_show_list_and_search_print_every_character_and_no_escape_sequence(text):
    shown = entry(text)
    assert_shown_literally(text, printed(skills_view.print_entry, shown, [], "no verdict"))
    assert_shown_literally(text, printed(skills_view.print_entries, [shown], {}))
    found = RetrievedSkills(general=[RetrievedEntry(shown, 0.5)])
    assert_shown_literally(text, printed(skills_view.print_retrieved, found))


def test_visible_spells_out_what_would_act_and_keeps_the_rest():
    assert visible("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert visible("\x1b]8;;http://x\x1b\\link") == "\\x1b]8;;http://x\\x1b\\link"
    assert visible("line\nnext\ttab") == "line\nnext\ttab"
    assert visible("abc\u202eevil") == "abc\\u202eevil"
    assert visible("\udcff") == "\\udcff"
    assert hidden_character("plain [text]") is None
    assert hidden_character("a\rb") == "U+000D (\\x0d, a control character) at position 1"


def _set_text(workspace: Path, entry_id: str, **fields: str) -> None:
    """Write text into an entry behind the bank's back (as an older bank may hold it)."""
    connection = sqlite3.connect(workspace / "bank.sqlite")
    for name, value in fields.items():
        connection.execute(f"UPDATE entries SET {name} = ? WHERE id = ?", (value, entry_id))
    connection.commit()
    connection.close()


TRICKY = {
    "title": "click[buy now] before choosing a size [/oops]",
    "principle": "see [link=https://example.com]here[/link] \x1b]8;;https://x\x1b\\y\x1b[2J done",
    "when_to_apply": "always\x07 [bold]now[/bold] \x9b31m",
}


@pytest.mark.parametrize("command", ["show", "list", "search", "history"])
def test_the_commands_print_bank_text_literally(cli_bank, command):  # noqa: F811
    workspace, size_id = cli_bank
    _set_text(workspace, size_id, **TRICKY)
    args = {"show": [size_id], "list": [], "search": ["choose a size"], "history": [size_id]}
    result = run(workspace, command, *args[command])
    assert result.exit_code == 0, result.output
    assert not ESCAPE.search(result.output), repr(result.output)
    flat = " ".join(result.output.split())
    if command in ("show", "list", "search"):  # tables may wrap the title: word by word
        words = result.output.split()
        assert all(w in words for w in TRICKY["title"].split()), result.output
    if command == "show":
        assert "[link=https://example.com]here[/link]" in flat
        assert "\\x1b]8;;https://x\\x1b\\y\\x1b[2J" in flat
        assert "always\\x07 [bold]now[/bold] \\x9b31m" in flat


def column_cells(output: str, name: str) -> list[str]:
    """The cells of column ``name`` per row (a row's wrapped lines joined), in order."""
    lines = output.splitlines()
    header = next(line for line in lines if f" {name} " in line).split("┃")
    column = [c.strip() for c in header].index(name)
    rows: list[list[str]] = []
    for line in (line for line in lines if "│" in line):
        cells = line.split("│")
        if cells[0].strip():  # an id: a new row
            rows.append([])
        rows[-1].append(cells[column].strip())
    return ["".join(parts) for parts in rows]


def test_list_at_80_columns_keeps_every_category_whole(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    categories = ["beauty_personal_care", "beauty_hair_care", "fashion_women_shoes",
                  "fashion_men_shoes"]  # fmt: skip
    entries = [
        Entry(kind="task", title=f"Check the options before buying {c}", principle="p",
              when_to_apply="w", id=f"{i}" * 32, env="webshop", category=c)
        for i, c in enumerate(categories)
    ]  # fmt: skip
    output = printed(skills_view.print_entries, entries, {})
    assert max(len(line) for line in output.splitlines()) <= 80
    assert "4 active webshop entries" in output  # one environment: named once, in the title
    assert column_cells(output, "category") == categories  # whole: no look-alike "beauty…"
    assert all(cell == "0" for cell in column_cells(output, "used"))  # short columns uncut
    sokoban = Entry(kind="task", title="Push plan", principle="p", when_to_apply="w",
                    id="a" * 32, env="sokoban", category="6x6-1box")  # fmt: skip
    mixed = printed(skills_view.print_entries, [entries[0], sokoban], {})
    assert column_cells(mixed, "env/category") == ["webshop/beauty_personal_care",
                                                   "sokoban/6x6-1box"]  # fmt: skip
    assert "2 active entries" in mixed
    assert "1 active webshop entry" in printed(skills_view.print_entries, entries[:1], {})
