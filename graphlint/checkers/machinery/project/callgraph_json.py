"""The project's call graph in PyCG's JSON shape, for users and for measuring resolution.

`graphlint callgraph PATH` prints `{"caller": ["callee", ...]}` with PyCG's names: a module's
top level is the module itself (`main`), functions and methods are dotted (`main.A.func`),
nested functions drop `<locals>` (`main.f.inner`). It is the graph the findings are judged
on (`call_graph.CallGraph`), capture roots left out: every call graphlint resolves is an
edge, whether or not it is reachable from a capture; calls it cannot resolve are left out,
never guessed, and so are calls in code no capture runs, which the binder does not record (an
arm a capture-state test rules out, a process-wide singleton's build). A parameter's call
(`fn(x)` in `def run(fn, x)`) is an edge to what the callers pass it (the value flow's
answer, `value_flow`). A call of a name outside the project
(a builtin, a library function) is an edge to that name as PyCG writes it (`<builtin>.len`,
`ext.function`): a leaf, since it is not analysed.
"""

from __future__ import annotations

from graphlint.checkers.machinery.project.phase import Project

_MODULE_SCOPE = ".<module>"


def pycg_name(qualname: str) -> str:
    """graphlint's qualname as PyCG names it (`m.<module>` -> `m`, `f.<locals>.g` -> `f.g`)."""
    name = qualname.removesuffix(_MODULE_SCOPE)
    name = name.replace(".<locals>", "")
    return name.split("@", 1)[0]  # a redefinition keeps the name it is called by


def call_graph(project: Project) -> dict[str, list[str]]:
    """Every analysed function with the functions its calls resolve to (context-insensitive)."""
    graph = project.call_graph.graph
    edges: dict[str, set[str]] = {}
    outside = project.flow.outside
    for qualname in project.call_graph.functions():
        callees = edges.setdefault(pycg_name(qualname), set())
        callees.update(pycg_name(callee) for callee in graph.successors(qualname))
        callees.update(outside.get(qualname, ()))
    return {caller: sorted(callees) for caller, callees in sorted(edges.items())}
