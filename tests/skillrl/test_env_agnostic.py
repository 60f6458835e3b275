"""The runtime knows no environment: no WebShop word in skillrl/, trainers/ or memory/ code.

Environment knowledge (grammar, prompts, product ids, page markup) lives in ``envs/<name>/``
behind the adapter protocols (``envs/adapter.py`` for the runtime, ``envs/distill_adapter.py``
for the distiller). Docstrings and comments may name WebShop as an example; code and string
literals may not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = re.compile(r"search\[|click\[|webshop|\basin\b|\[sep\]", re.IGNORECASE)
KNOWN: dict[str, set[str]] = {}
"""Hits still to move, per file (a new one fails the test; a moved one should leave this)."""


def _code_words(source: str) -> list[tuple[int, str]]:
    """String literals that are not docstrings, and every identifier, with their line."""
    tree = ast.parse(source)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
        # Attribute docstrings (a string right after an assignment) are documentation too.
        for field in ("body", "orelse"):
            statements = getattr(node, field, None)
            if not isinstance(statements, list):
                continue
            for before, after in zip(statements, statements[1:], strict=False):
                if (
                    isinstance(before, ast.Assign | ast.AnnAssign)
                    and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                ):
                    docstrings.add(id(after.value))
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                words.append((node.lineno, node.value))
        elif isinstance(node, ast.Name):
            words.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            words.append((node.lineno, node.attr))
        elif isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            words.append((node.lineno, node.name))
        elif isinstance(node, ast.ImportFrom):
            words.append((node.lineno, node.module or ""))
            words.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            words.extend((node.lineno, alias.name) for alias in node.names)
    return words


def _runtime_files() -> list[Path]:
    """The runtime, the trainers, the skill bank (any environment's entries) and the CLI."""
    packages = ("skillrl", "trainers", "memory", "skillrl_cli")
    return [path for package in packages for path in sorted((ROOT / package).rglob("*.py"))]


@pytest.mark.parametrize("path", _runtime_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_runtime_code_names_no_environment(path):
    known = KNOWN.get(str(path.relative_to(ROOT)), set())
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for line, text in _code_words(path.read_text())
        if FORBIDDEN.search(text) and text not in known
    ]
    assert not found, "environment knowledge outside envs/:\n" + "\n".join(found)


def test_the_check_catches_what_it_names():
    source = 'PREFIX = "<action>search["\n"""a docstring may say click[buy now]"""\n'
    assert [t for _, t in _code_words(source) if FORBIDDEN.search(t)] == ["<action>search["]
    assert not [t for _, t in _code_words('def f():\n    """WebShop."""\n') if FORBIDDEN.search(t)]
    assert [t for _, t in _code_words("from envs.webshop import x\n") if FORBIDDEN.search(t)]
