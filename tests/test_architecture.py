"""The package's shape: no import cycles (late imports included), the machinery knows no rule,
the checker's core knows no flow, flows know no other flow, the runtime's analysis needs no
device, and functions short enough to read at once. Imports are read with `ast`, so a test here
fails on the layout it forbids without running any of it."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parent.parent / "graphlint"
MAX_FUNCTION_LINES = 60


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.Module, module: str, is_package: bool) -> set[str]:
    """Every module an import names, wherever the import is: module level, under
    `if TYPE_CHECKING:` (a cycle in the types is a cycle in the design) and inside functions (a
    late import hides a cycle from Python, not from the design). `from a import b` names `a`
    and `a.b`, which is a module when `b` is one."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


@cache
def _all_imports() -> dict[str, frozenset[str]]:
    """Each graphlint module -> every module it imports (graphlint's and others')."""
    return {
        name: frozenset(_imports(ast.parse(path.read_text()), name, path.name == "__init__.py"))
        for name, path in _modules().items()
    }


def _import_graph() -> nx.DiGraph:
    modules = _all_imports()
    graph = nx.DiGraph()
    for name, targets in modules.items():
        graph.add_node(name)
        graph.add_edges_from((name, t) for t in targets if t in modules and t != name)
    return graph


def _under(package: str) -> list[str]:
    """The modules of `package`; a layering rule about a package that is not there fails."""
    found = [m for m in _all_imports() if m == package or m.startswith(package + ".")]
    assert found, f"no package {package}: the layout this test holds is not there"
    return found


def _offending(modules: list[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{module} imports {target}"
        for module in modules
        for target in _all_imports()[module]
        if any(target == f or target.startswith(f + ".") for f in forbidden)
    )


def test_no_import_cycles() -> None:
    cycles = list(nx.simple_cycles(_import_graph()))
    assert cycles == [], f"import cycles: {cycles}"


MACHINERY = "graphlint.checkers.machinery"
FLOWS = (f"{MACHINERY}.flows.replay", f"{MACHINERY}.flows.stream", f"{MACHINERY}.values")
RUNTIME = "graphlint.runtime_sanitizer"


def test_the_core_imports_no_flow() -> None:
    """The binder and what it stands on know no flow, no value flow and no project phase: the
    flows lend the binder what it needs through `core.flow_hooks`, wired by the file phase."""
    forbidden = (*FLOWS, f"{MACHINERY}.project", f"{MACHINERY}.summarize", f"{MACHINERY}.host_attributes")
    assert _offending(_under(f"{MACHINERY}.core"), forbidden) == []


def test_flows_do_not_import_each_other() -> None:
    """The replay flow, the stream flow and the value flow each stand on the core alone, so a
    change to one cannot change another's findings."""
    found = []
    for flow in FLOWS:
        found += _offending(_under(flow), tuple(other for other in FLOWS if other != flow))
    assert found == []


def test_the_runtime_analysis_needs_no_device() -> None:
    """The runtime's analysis runs on recorded snapshots on any machine: nothing it imports,
    directly or through other graphlint modules (late imports included), imports torch, CUDA's
    bindings or the driver shim."""
    graph = _import_graph()
    analysis = _under(f"{RUNTIME}.analysis")
    reached = set(analysis).union(*(nx.descendants(graph, m) for m in analysis))
    device = ("torch", "cuda", f"{RUNTIME}.driver", f"{RUNTIME}.capture")
    assert _offending(sorted(reached), device) == []


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


MAX_MODULES_PER_FOLDER = 15


def test_a_folder_shows_its_subsystems() -> None:
    """A folder of more than about 15 modules hides subsystems that only file-name prefixes tell
    apart (the flat `machinery/` of 45 modules did): past that, a subsystem gets a subpackage."""
    crowded = []
    for folder in sorted({path.parent for path in PACKAGE.rglob("*.py")}):
        modules = [p.name for p in folder.glob("*.py") if p.name != "__init__.py"]
        if len(modules) > MAX_MODULES_PER_FOLDER:
            crowded.append(f"{folder.relative_to(PACKAGE.parent)}: {len(modules)} modules")
    assert crowded == [], "folders over 15 modules: " + ", ".join(crowded)
