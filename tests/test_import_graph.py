"""No import circle among qnb's modules: each module can be read (and imported) after the
ones it uses. Every ``import`` counts, at module level, inside a function or under ``if
TYPE_CHECKING:`` (a lazy import, or one for the type checker, is still a dependency of
the design, and the circle it closes breaks the day it moves to the top)."""

from __future__ import annotations

import ast
from pathlib import Path

import qnb

PACKAGE = Path(qnb.__file__).resolve().parent

# Circles not broken yet; each entry is one circle's modules. Remove an entry when its
# circle is gone: the test then holds it gone.
KNOWN_CIRCLES = []


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imported(name: str, path: Path, modules: dict) -> set[str]:
    """The qnb modules ``name`` imports. ``from P import X`` imports P's submodule X where
    there is one, else P itself. A module's own ancestor packages are left out: Python has
    run them before the module, so importing one is never what closes a circle."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        for target in targets:
            while target and target not in modules:  # `import qnb.x.y` names qnb.x.y
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_qnbs_imports():
    """The analysis is not vacuous: it finds imports qnb is known to make, lazy ones too."""
    graph = import_graph()
    assert len(graph) > 50
    assert "qnb.errors" in graph["qnb.kernel"]  # from qnb.errors import ...
    assert "qnb.cache.store" in graph["qnb.cli"]  # inside a function: from qnb.cache import store
    assert "qnb.loc" in graph["qnb.errors"]  # under `if TYPE_CHECKING:`
    assert "qnb" not in graph["qnb.kernel"]  # its own package: never a circle's edge


def test_the_circle_finder_finds_a_circle_through_a_lazy_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [{"a", "b", "c"}]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_among_qnbs_modules():
    found = [sorted(c) for c in circles(import_graph()) if c not in KNOWN_CIRCLES]
    assert found == [], f"import circles: {found}"
