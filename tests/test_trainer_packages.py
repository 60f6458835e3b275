"""The packages of ``trainers/`` (docs/ARCHITECTURE.md): no trainer imports another's modules.

The cold start, the GRPO/RFT update and the improvement cycle each have a package, and share
``trainers/common``. ``common`` imports no trainer; ``cold_start`` and ``update`` import only
themselves and ``common``; the cycle drives the update, so it may import ``update`` as well.
``evaluate`` and ``runs`` sit beside the packages (they serve the CLI) and no package imports
them. Every import statement counts, as in ``test_layers.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_layers import Import, imports_of

ROOT = Path(__file__).resolve().parents[1]

MAY_IMPORT: dict[str, frozenset[str]] = {
    "common": frozenset({"common"}),
    "cold_start": frozenset({"cold_start", "common"}),
    "update": frozenset({"update", "common"}),
    "cycle": frozenset({"cycle", "update", "common"}),
}
"""Package of ``trainers`` -> the packages of ``trainers`` its modules may import."""

BESIDE = frozenset({"__init__", "evaluate", "runs"})
"""Modules of ``trainers/`` itself, beside the packages."""


def package_of(module: str) -> str | None:
    """``trainers.update.grpo`` -> ``update``; None for what is not in a trainers package."""
    parts = module.split(".")
    if parts[0] != "trainers" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in MAY_IMPORT else None


def violations(imports: list[Import], *, package: str) -> list[str]:
    """One line per import of ``trainers`` that the package ``package`` may not make."""
    out = []
    for imp in imports:
        parts = imp.module.split(".")
        if parts[0] != "trainers" or imp.module == "trainers":
            continue
        target = package_of(imp.module)
        if target in MAY_IMPORT[package]:
            continue
        allowed = ", ".join(sorted(MAY_IMPORT[package]))
        out.append(
            f"{imp.path}:{imp.line} imports {imp.module}: trainers/{package} may import only "
            f"trainers' {allowed}"
        )
    return out


def test_each_trainer_imports_only_itself_and_what_the_trainers_share() -> None:
    problems = []
    for package in MAY_IMPORT:
        for path in sorted((ROOT / "trainers" / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            found = imports_of(path.read_text(encoding="utf-8"), relative)
            problems += violations(found, package=package)
    assert not problems, "a trainer reaches into another:\n" + "\n".join(problems)


def test_no_module_sits_loose_beside_the_packages() -> None:
    loose = {p.stem for p in (ROOT / "trainers").glob("*.py")} - BESIDE
    assert not loose, f"put these in a package of trainers/: {sorted(loose)}"
    assert {p.name for p in (ROOT / "trainers").iterdir() if (p / "__init__.py").exists()} == set(
        MAY_IMPORT
    )


@pytest.mark.parametrize(
    ("path", "source", "package"),
    [
        (
            "trainers/cold_start/x.py",
            "from trainers.update.batching import TurnBatch",
            "cold_start",
        ),
        ("trainers/update/x.py", "def f():\n    import trainers.cycle.cycle\n", "update"),
        ("trainers/common/x.py", "from trainers.cold_start import sft_data", "common"),
        ("trainers/cycle/x.py", "from trainers.runs import list_runs", "cycle"),
    ],
)
def test_the_checker_catches_a_reach_into_another_trainer(path, source, package) -> None:
    assert violations(imports_of(source, path), package=package)


def test_the_checker_lets_the_cycle_drive_the_update() -> None:
    source = "from trainers.update.grpo import GRPOTrainer\nfrom trainers.common import seeding"
    assert violations(imports_of(source, "trainers/cycle/x.py"), package="cycle") == []
