"""The source tree's shape: no module over 600 lines and no
import cycle among autocompact's modules (import-linter's contracts cannot say "no cycles")."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "autocompact"
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    """Every module under src/autocompact, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_over_the_line_limit() -> None:
    """No module under src/ exceeds 600 lines."""
    over = sorted(
        f"{path.relative_to(PACKAGE).as_posix()} ({_line_count(path)} lines)"
        for path in _modules().values()
        if _line_count(path) > MAX_LINES
    )
    assert over == [], f"split these modules below {MAX_LINES} lines: {over}"


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The autocompact modules ``name`` imports anywhere in its file (lazy and TYPE_CHECKING
    imports included: a circle through them is still a circle). ``from pkg import sub`` is an
    edge to ``pkg.sub`` when that is a module, else to ``pkg``."""
    is_package = path.name == "__init__.py"
    edges: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            edges.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                if not is_package:
                    anchor = anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in modules:
                    edges.add(target)
                elif base in modules:
                    edges.add(base)
    edges.discard(name)
    return edges


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_cycle_finder_finds_a_planted_cycle() -> None:
    """The cycle finder reports a planted circle and nothing for a chain (its control)."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycles_among_autocompact_modules() -> None:
    """No autocompact module imports, directly or through others, a module that imports it
    (the top-level package, which re-exports everything, is left out)."""
    modules = _modules()
    graph = {
        name: _imports(name, path, modules) - {"autocompact"}
        for name, path in modules.items()
        if name != "autocompact"
    }
    assert _cycles(graph) == []


# (importer, module, name): sessions/store.py is being rewritten by the stores work of issue 23;
# it should expose a public session-id function, and this entry go.
PRIVATE_IMPORTS_ALLOWED = {("autocompact.cli.store_cmd", "autocompact.sessions.store", "_new_id")}


def _private_imports(name: str, path: Path) -> set[tuple[str, str, str]]:
    """What ``name`` imports that is private to another module: an ``_underscored`` name from
    any other module, or anything from a ``_private`` module outside its own package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[tuple[str, str, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        if not node.module.startswith("autocompact"):
            continue
        parts = node.module.split(".")
        for depth, part in enumerate(parts):
            owner = ".".join(parts[:depth])
            if part.startswith("_") and not (package == owner or package.startswith(owner + ".")):
                found.add((name, node.module, "*"))
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                submodule = f"{node.module}.{alias.name}"
                if not (node.module == package and submodule in _modules()):
                    found.add((name, node.module, alias.name))
    return found


def test_private_import_finder_flags_a_planted_import(tmp_path: Path) -> None:
    """The finder flags a private name and a foreign private module, not a public import."""
    planted = tmp_path / "mod.py"
    planted.write_text(
        "from autocompact.chat import _hidden\n"
        "from autocompact.providers._common import looks_like_overflow\n"
        "from autocompact.engine import Engine\n",
        encoding="utf-8",
    )
    assert _private_imports("autocompact.cli.mod", planted) == {
        ("autocompact.cli.mod", "autocompact.chat", "_hidden"),
        ("autocompact.cli.mod", "autocompact.providers._common", "*"),
    }


def test_no_module_imports_another_modules_private_name() -> None:
    """Private names stay in their module, and a package's ``_private`` modules are its own."""
    found: set[tuple[str, str, str]] = set()
    for name, path in _modules().items():
        found |= _private_imports(name, path)
    assert found - PRIVATE_IMPORTS_ALLOWED == set()
