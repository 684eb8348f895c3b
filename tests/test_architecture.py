"""The package's shape, as engine v2 promised it: no import cycles, the machinery knows no rule,
and functions short enough to read at once."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parent.parent / "graphlint"
MAX_FUNCTION_LINES = 60


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top_level_imports(tree: ast.Module, module: str, is_package: bool) -> set[str]:
    """Module-level imports, those under `if TYPE_CHECKING:` included (a cycle in the types is
    a cycle in the design); imports inside functions are deliberate late bindings."""
    found: set[str] = set()
    for node in tree.body:
        for inner in [node] if not isinstance(node, (ast.If, ast.Try)) else list(ast.walk(node)):
            if isinstance(inner, ast.Import):
                found.update(alias.name for alias in inner.names)
            elif isinstance(inner, ast.ImportFrom):
                base = inner.module or ""
                if inner.level:
                    anchor = module.split(".") if is_package else module.split(".")[:-1]
                    anchor = anchor[: len(anchor) - inner.level + 1]
                    base = ".".join([*anchor, base]) if base else ".".join(anchor)
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in inner.names)
    return found


def _import_graph() -> nx.DiGraph:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for target in _top_level_imports(ast.parse(path.read_text()), name, path.name == "__init__.py"):
            if target in modules and target != name:
                graph.add_edge(name, target)
    return graph


def test_no_import_cycles() -> None:
    cycles = list(nx.simple_cycles(_import_graph()))
    assert cycles == [], f"import cycles: {cycles}"


def test_the_machinery_imports_no_rule() -> None:
    """Rules plug into the machinery through hooks; the machinery never names one."""
    graph = _import_graph()
    for module in graph:
        if module.startswith("graphlint.checkers.machinery"):
            rules = [t for t in graph.successors(module) if t.startswith("graphlint.checkers.rules")]
            assert not rules, f"{module} imports {rules}"


def test_functions_are_short() -> None:
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({length} lines)")
    assert long == [], "functions over 60 lines: " + ", ".join(long)
