"""No import circles among our modules: the module graph read from every import statement.

Beside ``test_layers.py`` (which keeps imports pointing down the layers), this keeps modules of one
layer from importing each other in a circle. Every import counts, at module level, inside
functions and under ``if TYPE_CHECKING`` alike (a deferred import is still a dependency that a
reader has to follow both ways), as does ``importlib.import_module("literal")``; an import of
``a.b.c`` is an edge to the deepest of our modules it names. The graph's strongly connected
components (Tarjan's algorithm) must all be single modules.
"""

from __future__ import annotations

from pathlib import Path

from test_layers import LIBRARY, imports_of

ROOT = Path(__file__).resolve().parents[1]


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the layers (migrations aside)."""
    found = {"cli": ROOT / "cli.py"}
    for package in LIBRARY:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports."""
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets = set()
        for found in imports_of(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))):
            module = found.module
            while module and module not in files:
                module = module.rpartition(".")[0]
            if module and module != name:
                targets.add(module)
        graph[name] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan 1972, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_through_others() -> None:
    found = circles(import_graph(module_files()))
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_check_finds_a_circle_and_only_circles() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set(), "c": {"b"}}) == []
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}) == [["a", "b"], ["c", "d"]]
