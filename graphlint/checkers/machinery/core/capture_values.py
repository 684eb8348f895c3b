"""Graph capture contexts reached through values, not written out as `torch.cuda.graph(...)`.

Frameworks pick the capture context at run time and hold it in a name: SGLang's runner
backends write `graph_ctx = self._device_module.graph` (or, with the memory saver on, a
`partial` of the saver's own graph context) and then `with graph_ctx(cuda_graph=graph, ...)`.
The binder asks `is_graph_context` of every `with` item's callee, so such a body is a
capture region like a literal `torch.cuda.graph(g)` body.

What counts as the graph context, never by guessing from what a name merely sounds like:
  - `torch.cuda.graph`, and the same member of a device module (`torch.get_device_module()
    .graph`, `get_accelerator().graph`, a local or attribute the binder knows holds one);
  - `<x>.device_module.graph` (or `_device_module`): in every framework of the corpus a
    value named `device_module` is `torch.get_device_module(...)` (or a test's stand-in);
  - a local or `self.<attr>` that some assignment in the function (class) bound to one of
    these, whatever other branches bound it to (one branch capturing is enough: the body
    runs in a capture on that branch);
  - `functools.partial(<one of these>, ...)`, and `a if cond else b` where either is one.

A device module is not always CUDA's: `torch.xpu.graph(xpu_graph=g)` (SGLang's Intel backend,
through the same `self._device_module.graph`) records an XPU graph. A call that hands its graph
over as another device's keyword (`xpu_graph=`, `npu_graph=`; CUDA's is `cuda_graph=`) is not
a CUDA capture (`other_device_graph`).
"""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core.module_state import Binder
from graphlint.checkers.machinery.core.names import dotted_parts
from graphlint.checkers.machinery.core.syntax import is_self_attr

CAPTURE_CONTEXTS = frozenset({"torch.cuda.graph"})
# torch 2.13's device-generic graph: the instance is its own context manager (`with stream, g:`)
ACCELERATOR_GRAPHS = frozenset({"torch.accelerator.Graph", "torch.accelerator.graphs.Graph"})
_PARTIAL = frozenset({"functools.partial"})


def is_graph_context(walker: Binder, node: ast.expr) -> bool:
    """Whether calling ``node`` gives a graph capture context (see the module docstring)."""
    if walker.resolve(node) in CAPTURE_CONTEXTS or _device_module_graph(node):
        return True
    if isinstance(node, ast.Name):
        return any(node.id in held for held in _held_names(walker))
    if is_self_attr(node) and walker.class_qualname is not None:
        return (walker.class_qualname, node.attr) in walker.st.graph_context_attrs
    if isinstance(node, ast.Call) and walker.resolve(node.func) in _PARTIAL and node.args:
        return is_graph_context(walker, node.args[0])
    if isinstance(node, ast.IfExp):
        return is_graph_context(walker, node.body) or is_graph_context(walker, node.orelse)
    return False


def other_device_graph(context: ast.Call) -> bool:
    """`device_module.graph(xpu_graph=g)`: the graph is another device's (see the module docstring)."""
    return any(
        keyword.arg is not None and keyword.arg.endswith("_graph") and keyword.arg != "cuda_graph"
        for keyword in context.keywords
    )


def note_assignment(walker: Binder, target: ast.expr, value: ast.expr) -> None:
    """`graph_ctx = torch.cuda.graph` or `self.ctx = partial(torch.cuda.graph, pool=p)`: remember
    the name, so a later `with graph_ctx(g):` is a capture region."""
    if isinstance(target, ast.Name):
        if is_graph_context(walker, value):
            walker.graph_context_names.add(target.id)
    elif is_self_attr(target) and walker.class_qualname is not None and is_graph_context(walker, value):
        walker.st.graph_context_attrs.add((walker.class_qualname, target.attr))


def _held_names(walker: Binder) -> list[set[str]]:
    return [w.graph_context_names for w in walker.chain()]


def _device_module_graph(node: ast.expr) -> bool:
    if not (isinstance(node, ast.Attribute) and node.attr == "graph"):
        return False
    parts = dotted_parts(node.value)
    return parts is not None and parts[-1].lstrip("_") == "device_module"
