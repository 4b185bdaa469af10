"""No module of memoryd or memoryd_client imports itself back, even for types only.

A cycle works until someone moves an import, then fails at start-up; it also says two modules
are one idea split badly.  The imports are read as text (``ast``), top-level and under
``if TYPE_CHECKING:``; imports inside functions (lazy ones, for start-up time) do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGES = {"memoryd": REPO / "memoryd", "memoryd_client": REPO / "client" / "memoryd_client"}


def module_files() -> dict[str, Path]:
    modules = {}
    for package, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports at its top level; ``from pkg import sub`` counts as
    importing ``pkg.sub``, ``from mod import thing`` as importing ``mod``."""
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for statement in ast.parse(path.read_text(encoding="utf-8")).body:
        nodes = ast.walk(statement) if isinstance(statement, (ast.If, ast.Try)) else [statement]
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in modules else base)
    return {module for module in found if module in modules and module != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
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

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_back() -> None:
    modules = module_files()
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    assert len(graph) > 100  # the walk found the tree
    assert cycles(graph) == []


def test_the_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
