"""Which functions replay a CUDA graph every time they run: the replay side of a runner.

Code does not replay a graph while it captures one. A runner's `execute` that loads a batch
into its static buffers and replays is called by code that chose to replay instead of
capturing, outside any capture. Yet the value flow, which is flow-insensitive, cannot always
tell which runner an attribute holds where a capture calls through it: SGLang's draft model
runner holds its eager runner in the attribute where the target model runner holds its decode
graph runner, so every draft capture seemed to run the decode runner's replay path and all of
its host preparation. A call from captured code into a function that always replays is a call
no capture makes; the capture reach leaves it out (`project/replayers`). The file phase
(`summarize`) records, after the binder's walk, which functions are replay sides
(`FunctionSummary.replays`) and the calls that may make them one (`replay_calls`).

A function *always replays* when one of the statements it runs on every path that returns
normally calls `.replay()` on a CUDA graph: its body in order, into `with` and `try` bodies, up
to the first statement that may return early (a `raise` guard before the replay leaves no path
that returns without it). A graph is a receiver the binder knows to be a
`torch.cuda.CUDAGraph`, one the code names as a graph (`self._graphs[key]`, `entry.cudagraph`),
or the driver's `cudaGraphLaunch(...)`. A function that replays only in one branch (a wrapper
that captures on its first call and replays afterwards) is not a replay side: its capture
branch is what a capture may run.

A `.replay(...)` on anything else (`self.backend.replay(key, batch)`, a DeepEP adapter's
`replay()` that only sets a dispatch mode) is kept by position: the project phase decides it
once it knows whether what that call runs always replays.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Generator, Iterator

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.module_state import Binder, ModuleState
from graphlint.checkers.machinery.core.syntax import FUNCTION_NODES, TRY_NODES, child_fields

_GRAPH_NAME = re.compile(r"graph", re.IGNORECASE)
_LAUNCH = "cudaGraphLaunch"
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_SKIPPED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)  # may not run here


def record(state: ModuleState) -> None:
    """Mark each function of the file that replays a graph every time it runs, and keep the
    other `.replay(...)` calls it always makes, by position, for the project phase."""
    for walker in state.walkers:
        if not isinstance(walker.node, FUNCTION_NODES):
            continue
        replays, delegated = always_replays(walker.node.body, functools.partial(_is_graph, walker))
        walker.summary.replays = replays
        walker.summary.replay_calls = [(line, column) for line, column, _, _ in map(state.span, delegated)]


def _is_graph(walker: Binder, receiver: ast.expr) -> bool:
    if named_as_graph(receiver):
        return True
    ty = walker.ty(receiver)
    return ty is not None and ty.kind == T.GRAPH


def always_replays(body: list[ast.stmt], is_graph: Callable[[ast.expr], bool]) -> tuple[bool, list[ast.Call]]:
    """Whether ``body`` replays a graph on every normal path, and, if not known, the other
    `.replay(...)` calls it always makes (the project phase resolves those)."""
    delegated: list[ast.Call] = []
    for expr in _always_evaluated(body):
        for node in _unconditional(expr):
            if not isinstance(node, ast.Call):
                continue
            receiver = _replay_receiver(node)
            if _launches(node) or (receiver is not None and is_graph(receiver)):
                return True, []
            if receiver is not None:
                delegated.append(node)
    return False, delegated


def named_as_graph(receiver: ast.expr) -> bool:
    """`graph`, `self._graphs[key]`, `entry.cudagraph`, `runner.fwd_graph`: the name the code
    gives the receiver says it is a graph."""
    while isinstance(receiver, ast.Subscript):
        receiver = receiver.value
    if isinstance(receiver, ast.Attribute):
        return bool(_GRAPH_NAME.search(receiver.attr))
    return isinstance(receiver, ast.Name) and bool(_GRAPH_NAME.search(receiver.id))


def _replay_receiver(call: ast.Call) -> ast.expr | None:
    func = call.func
    return func.value if isinstance(func, ast.Attribute) and func.attr == "replay" else None


def _launches(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name == _LAUNCH


def _always_evaluated(body: list[ast.stmt]) -> Generator[ast.AST, None, None]:
    """The expressions evaluated on every path through ``body`` until it may leave early."""
    for stmt in body:
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            yield from (item.context_expr for item in stmt.items)
            if not (yield from _through(stmt.body)):
                return
        elif isinstance(stmt, TRY_NODES):
            if not (yield from _through(stmt.body)):
                return
        elif isinstance(stmt, (ast.If, ast.While)):
            yield stmt.test
            if _may_leave(stmt):
                return
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            yield stmt.iter
            if _may_leave(stmt):
                return
        elif isinstance(stmt, (ast.Return, ast.Raise)):
            yield stmt
            return
        elif isinstance(stmt, ast.Match):
            if _may_leave(stmt):
                return
        elif not isinstance(stmt, _DEFINITIONS):
            yield stmt


def _through(body: list[ast.stmt]) -> Generator[ast.AST, None, bool]:
    """A nested block's expressions; returns (as the generator's value) whether the block
    cannot leave early, so the statements after it still always run."""
    yield from _always_evaluated(body)
    return not any(_may_leave(stmt) for stmt in body)


def _may_leave(stmt: ast.stmt) -> bool:
    """Whether a `return` inside ``stmt`` (outside nested definitions) may end the function
    normally. A `raise` ends it too, but no caller then goes on with what it would have run."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            return True
        stack.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, (ast.expr, *_DEFINITIONS)))
    return False


def _unconditional(expr: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``expr`` evaluated whenever it is: not a lambda's or a comprehension's body,
    a conditional expression's arms, or the operands a boolean operator may skip."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, _SKIPPED):
            continue
        yield node
        if isinstance(node, ast.IfExp):
            stack.append(node.test)
        elif isinstance(node, ast.BoolOp):
            stack.append(node.values[0])
        elif isinstance(node, ast.stmt):
            stack.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.stmt))
        else:
            for name in child_fields(type(node)):
                value = getattr(node, name)
                if isinstance(value, list):
                    stack.extend(item for item in value if isinstance(item, ast.AST))
                elif isinstance(value, ast.AST):
                    stack.append(value)
