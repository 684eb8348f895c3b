"""Names bound to a module without an `import` statement, so that torch is torch under any binding.

Tests import torch as `torch = pytest.importorskip("torch")`, plugins as
`importlib.import_module("torch")`, and modules keep short aliases of torch's own modules
(`cuda = torch.cuda`). To the binder each is the import it stands for: without that, every
`torch.cuda.graph(...)` of such a file is an unknown call and its hazards go unreported.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable

from graphlint.checkers.machinery.core.names import ImportMap, dotted_parts
from graphlint.checkers.machinery.core.syntax import bound_names

# The calls that return a module named by their first argument: True when they return the
# top package (`__import__("torch.cuda")` is `torch`), False for the named module itself.
_IMPORTERS = {"pytest.importorskip": False, "importlib.import_module": False, "__import__": True}
_TORCH = "torch"


def importer_call(stmt: ast.stmt) -> tuple[str, ast.Call] | None:
    """``(name, call)`` for `name = f("module", ...)`, the shape of a dynamic import; a
    cheap filter run on every statement, before the imports it depends on are known."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    call = stmt.value
    if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant):
        if isinstance(call.args[0].value, str):
            return stmt.targets[0].id, call
    return None


def bind_dynamic_imports(candidates: Iterable[tuple[str, ast.Call]], imports: ImportMap) -> None:
    """Bind each candidate whose call is an importer to the module it returns."""
    for name, call in candidates:
        parts = dotted_parts(call.func)
        if parts is None:
            continue
        base = imports.names.get(parts[0], "__import__" if parts == ["__import__"] else None)
        top = _IMPORTERS.get(".".join([base, *parts[1:]])) if base else None
        module = call.args[0].value  # type: ignore[attr-defined]  # a str constant (importer_call)
        if top is None or module.startswith(".") or not module:
            continue
        imports.names[name] = module.partition(".")[0] if top else module


def bind_torch_aliases(module_statements: Iterable[ast.stmt], imports: ImportMap) -> None:
    """`cuda = torch.cuda` (or `graph = torch.cuda.graph`) at module level, assigned once:
    the name stands for what it names in torch, as `from torch import cuda` would."""
    found: list[tuple[str, str]] = []
    counts: Counter[str] = Counter()
    for stmt in module_statements:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            counts.update(name for target in targets for name in bound_names(target))
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            parts = dotted_parts(stmt.value)
            if parts and len(parts) > 1 and imports.names.get(parts[0], "").partition(".")[0] == _TORCH:
                found.append((stmt.targets[0].id, ".".join([imports.names[parts[0]], *parts[1:]])))
    for name, dotted in found:
        if counts[name] == 1 and name not in imports.names:
            imports.names[name] = dotted
