"""The package layers of docs/ARCHITECTURE.md ("Layers"), checked on every import statement.

Every ``import`` and ``from ... import`` in the packages is read with :mod:`ast` (module level,
inside functions and under ``if TYPE_CHECKING`` alike, since a deferred import is still a
dependency), as is every ``importlib.import_module("literal")``. A module may import its own layer
and the layers below it as ``MAY_IMPORT`` lists them; anything else fails, naming file, line and
module.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

MAY_IMPORT: dict[str, frozenset[str]] = {
    "skillrl_core": frozenset(),
    "envs": frozenset({"skillrl_core"}),
    "memory": frozenset({"skillrl_core"}),
    "skillrl": frozenset({"skillrl_core", "envs", "memory"}),
    "trainers": frozenset({"skillrl_core", "envs", "memory", "skillrl"}),
    "cli": frozenset({"skillrl_core", "envs", "memory", "skillrl", "trainers"}),
}
"""Layer -> the other layers its modules may import (docs/ARCHITECTURE.md, "Layers")."""

PACKAGE_LAYER = {"skillrl_cli": "cli"}
"""Top-level packages named otherwise than their layer: the CLI's commands beside ``cli.py``."""

LIBRARY = ("skillrl_core", "envs", "memory", "skillrl", "trainers", "skillrl_cli")
"""Folders whose modules belong to a layer (``cli.py`` is the other member of ``cli``)."""


@dataclass(frozen=True)
class Import:
    """One imported module name, where it is imported."""

    path: str
    line: int
    module: str


def layer_of_module(name: str) -> str | None:
    """The layer a dotted module name belongs to (None: not ours, e.g. ``torch``)."""
    top = name.split(".")[0]
    return PACKAGE_LAYER.get(top, top if top in MAY_IMPORT else None)


def layer_of_path(relative: str) -> str | None:
    """The layer of a source file given by its path from the repository root."""
    parts = Path(relative).with_suffix("").parts
    return layer_of_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))


def _package_of(relative: str) -> list[str]:
    parts = list(Path(relative).with_suffix("").parts)
    return parts[:-1]  # a module's package; for __init__.py, the package itself


def imports_of(source: str, relative: str) -> list[Import]:
    """Every module ``source`` (the file at ``relative``) imports, at any depth.

    ``from a import b`` yields both ``a`` and ``a.b`` (``b`` may be a module, as in
    ``from skillrl_cli import run``); relative imports are resolved against the file's package.
    """
    found: list[Import] = []
    for node in ast.walk(ast.parse(source, filename=relative)):
        if isinstance(node, ast.Import):
            found += [Import(relative, node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(relative)
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            if base:
                found.append(Import(relative, node.lineno, base))
            found += [
                Import(relative, node.lineno, f"{base}.{alias.name}" if base else alias.name)
                for alias in node.names
                if alias.name != "*"
            ]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Attribute, ast.Name))
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append(Import(relative, node.lineno, node.args[0].value))
    return found


def violations(imports: list[Import], *, layer: str | None) -> list[str]:
    """One line per import that crosses a layer the wrong way."""
    out = []
    reported: set[tuple[int, str]] = set()  # ``from a.b import c`` is one import, not two
    for imp in imports:
        target = layer_of_module(imp.module)
        if layer is None or target is None or target == layer or target in MAY_IMPORT[layer]:
            continue
        if (imp.line, target) in reported:
            continue
        reported.add((imp.line, target))
        allowed = ", ".join(sorted(MAY_IMPORT[layer])) or "nothing of ours"
        out.append(
            f"{imp.path}:{imp.line} imports {imp.module}: {layer} may import only {allowed} "
            f"(docs/ARCHITECTURE.md, Layers)"
        )
    return out


def _sources(*folders: str) -> list[str]:
    files = [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]
    return [p.relative_to(ROOT).as_posix() for p in files]


def _check(relative: str) -> list[str]:
    source = (ROOT / relative).read_text(encoding="utf-8")
    return violations(imports_of(source, relative), layer=layer_of_path(relative))


def test_every_layered_module_imports_only_its_own_and_lower_layers() -> None:
    files = [*_sources(*LIBRARY), "cli.py"]
    assert len(files) > 100 and all(layer_of_path(f) for f in files)
    problems = [line for f in files for line in _check(f)]
    assert not problems, "imports that cross a layer the wrong way:\n" + "\n".join(problems)


CAUGHT = [
    ("envs/x/env.py", "from memory import SkillBank", "memory"),
    ("memory/bank.py", "def f():\n    import envs.registry\n", "envs.registry"),
    ("skillrl/rollout.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
     "    from trainers.update.grpo import GRPOTrainer\n", "trainers.update.grpo"),
    ("skillrl/distill/x.py", "from skillrl_cli import run", "skillrl_cli"),
    ("trainers/x.py", "def f():\n    import skillrl_cli.run\n", "skillrl_cli.run"),
    ("trainers/cycle/cycle.py", "import cli", "cli"),
    ("skillrl_core/errors.py", "import skillrl", "skillrl"),
    ("skillrl/x.py", "import importlib\nimportlib.import_module('trainers.common.policy_rollouts')",
     "trainers.common.policy_rollouts"),
]  # fmt: skip
ALLOWED = [
    ("skillrl_cli/train.py", "from trainers.cycle.cycle import TrainingRun\nimport cli"),
    ("skillrl/rollout.py", "from memory import SkillBank\nfrom envs import make\nimport torch"),
    ("memory/bank.py", "from memory.store import BankStore\nfrom skillrl_core import errors"),
    ("skillrl/distill/x.py", "from . import pipeline\nfrom ..agent import Agent"),
    ("cli.py", "import importlib\nimportlib.import_module(name)"),
]


@pytest.mark.parametrize(("path", "source", "module"), CAUGHT)
def test_the_checker_catches_a_wrong_way_import(path: str, source: str, module: str) -> None:
    found = violations(imports_of(source, path), layer=layer_of_path(path))
    assert found and all(f.startswith(f"{path}:") for f in found)
    assert any(f" {module}" in f for f in found), found


@pytest.mark.parametrize(("path", "source"), ALLOWED)
def test_the_checker_lets_allowed_imports_through(path: str, source: str) -> None:
    assert violations(imports_of(source, path), layer=layer_of_path(path)) == []
