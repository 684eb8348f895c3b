"""A tensor's memory swapped out while an asynchronous communication of it is still in flight (GL301).

Pipeline schedules send a stage's output with an asynchronous point-to-point call and then
"pseudo-free" it: `out.data = torch.empty(1)` keeps the autograd node and drops the memory.
`del out` would be safe (the communication's work object holds the tensor), but `.data =`
swaps the memory under that tensor object: the old block is freed at once, and the allocator
hands it to the next allocation while NCCL is still reading it. The send's handle must be
waited before the swap (Megatron-LM fixed its interleaved schedule in 260cba71: the handle was
waited one pass later).

The function shows the whole story when a call is given the tensor and its result is a handle
the function waits on (`h.wait()`, through a name, `handles.pop("send")` or a list of them),
and the tensor's memory is swapped before any wait on that result: by `x.data = ...`,
`x.untyped_storage().resize_(0)`, or a helper of the same file that does one of those to its
first parameter. The walk is in statement order, both arms of a branch in turn, so a wait in
either arm counts for what follows; rebinding the tensor ends its watch.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.core.syntax import statements
from graphlint.checkers.machinery.flows.stream.side_storage import first_parameter_change, helper_summary, own_calls

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder, ModuleState

_DERIVING = frozenset({"pop", "get", "values"})  # `handles.pop("send_next")`: handles of a dict of them


@dataclass(frozen=True)
class SwappedBeforeWait:
    """``name``'s memory is swapped at ``node`` while the call at ``line`` may still use it."""

    kind: ClassVar[str] = "swapped-before-wait"
    node: ast.stmt
    name: str
    how: str  # the swap as written: `x.data = ...` or the helper's name
    line: int  # the asynchronous call


EVENTS = (SwappedBeforeWait,)


@dataclass(eq=False)
class _Pending:
    sent: set[str]
    handles: set[str]
    line: int
    waited: bool = field(default=False)


def analyze(state: ModuleState, source: str) -> None:
    """Emit `SwappedBeforeWait` for every function of the file that shows one."""
    if ".wait()" not in source or (".data" not in source and "resize_" not in source):
        return  # cheapest first: no wait, or no memory swapped, anywhere in the file
    functions = [walker for walker in state.walkers if walker.body and not walker.is_module]
    swapping = (".data", "resize_", *_releasing_helpers(functions))
    for walker in functions:
        text = _text(walker)
        if ".wait()" in text and any(word in text for word in swapping):
            for event in swapped_before_wait(walker):
                walker.emit(event)


def _text(walker: Binder) -> str:
    first, last = walker.body[0].lineno, walker.body[-1].end_lineno or walker.body[-1].lineno
    return "\n".join(walker.st.lines[first - 1 : last])


def _releasing_helpers(functions: list[Binder]) -> list[str]:
    """The module-level functions of the file that swap out their first parameter's memory."""
    names = [(w, w.qualname.rsplit(".", 1)[-1]) for w in functions]
    return [name for w, name in names if w.st.defs.get(name) == w.qualname and _swaps_first_parameter(w)]


def swapped_before_wait(walker: Binder) -> list[SwappedBeforeWait]:
    """The swaps of a tensor's memory after a call that was given it and whose handle is
    waited later, with no wait on that handle in between (see the module docstring)."""
    waitable = _waitable_names(walker.body)
    if not waitable:
        return []
    pending: list[_Pending] = []
    found = []
    for stmt in statements(walker.body):
        for call in own_calls(stmt):
            _note_wait(call, pending)
        for name, how in _swaps(walker, stmt):
            for entry in pending:
                if not entry.waited and name in entry.sent:
                    found.append(SwappedBeforeWait(stmt, name, how, entry.line))
                    entry.sent.discard(name)
        if isinstance(stmt, ast.Assign):
            _bind(stmt, waitable, pending)
    return found


def _waitable_names(body: list[ast.stmt]) -> set[str]:
    """Names the function waits on, and the names whose values reach them: `h = hs.pop(k)`,
    `h = hs[k]`, `waits.append(hs.pop(k))`, `for h in waits:` make `hs` (and `waits`) waitable
    when `h.wait()` is written."""
    waited: set[str] = set()
    edges: list[tuple[str, str]] = []  # (source, destination)
    for stmt in statements(body):
        if isinstance(stmt, ast.Assign):
            for source in _derived_from(stmt.value):
                edges += [(source, target.id) for target in stmt.targets if isinstance(target, ast.Name)]
        elif isinstance(stmt, (ast.For, ast.AsyncFor)) and isinstance(stmt.target, ast.Name):
            edges += [(source, stmt.target.id) for source in _derived_from(stmt.iter)]
        for call in own_calls(stmt):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "wait" and not call.args and not call.keywords:
                waited |= _derived_from(func.value)
            elif isinstance(func, ast.Attribute) and func.attr == "append" and isinstance(func.value, ast.Name):
                edges += [(source, func.value.id) for arg in call.args for source in _derived_from(arg)]
    changed = True
    while changed:
        changed = False
        for source, destination in edges:
            if destination in waited and source not in waited:
                waited.add(source)
                changed = True
    return waited


def _derived_from(value: ast.expr | None) -> set[str]:
    """The names a handle expression comes from: `h`, `hs[k]`, `hs.pop(k)`, `hs.get(k)`,
    `hs.values()`, and either arm of `a if c else b`."""
    if isinstance(value, ast.Name):
        return {value.id}
    if isinstance(value, ast.Subscript):
        return _derived_from(value.value)
    if isinstance(value, ast.IfExp):
        return _derived_from(value.body) | _derived_from(value.orelse)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _DERIVING:
        return _derived_from(value.func.value)
    return set()


def _bind(stmt: ast.Assign, waitable: set[str], pending: list[_Pending]) -> None:
    """An assignment: a call given tensors whose result is waited later starts a watch; a name
    bound from a watched handle joins it; a rebound name leaves every watch."""
    bound = {name for target in stmt.targets for name in _bound_names(target)}
    sources = _derived_from(stmt.value)
    call = stmt.value if isinstance(stmt.value, ast.Call) else None
    starts = call is not None and bool(bound & waitable)
    for entry in pending:
        joins = bool(sources & entry.handles)
        entry.sent -= bound
        if not starts:  # another call's handle under the same name: either arm of a branch may have run
            entry.handles -= bound
        if joins:
            entry.handles |= bound
    if call is not None and starts:
        arguments = [*call.args, *(k.value for k in call.keywords)]
        sent = {arg.id for arg in arguments if isinstance(arg, ast.Name)} - bound
        if sent:
            pending.append(_Pending(sent, bound & waitable, stmt.lineno))


def _bound_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _bound_names(element)]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return []  # `buffers[k] = ...`, `self.x = ...`: no name is rebound


def _note_wait(call: ast.Call, pending: list[_Pending]) -> None:
    func = call.func
    if not isinstance(func, ast.Attribute):
        return
    if func.attr == "synchronize":
        for entry in pending:
            entry.waited = True
    elif func.attr == "wait" and not call.args and not call.keywords:
        names = _derived_from(func.value)
        for entry in pending:
            entry.waited = entry.waited or bool(names & entry.handles)


def _swaps(walker: Binder, stmt: ast.stmt) -> list[tuple[str, str]]:
    """The names whose memory ``stmt`` swaps out, with how."""
    found = []
    if isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            if isinstance(target, ast.Attribute) and target.attr == "data" and isinstance(target.value, ast.Name):
                found.append((target.value.id, f"{target.value.id}.data = ..."))
    for call in own_calls(stmt):
        if call.args and isinstance(call.args[0], ast.Name) and _releases_first_argument(walker, call):
            found.append((call.args[0].id, source_text(call.func)))
    return found


def _releases_first_argument(walker: Binder, call: ast.Call) -> bool:
    """Is ``call`` a function of this file that swaps out its first parameter's memory
    (`p.data = ...`, or its storage resized to 0)?"""
    return bool(helper_summary(walker, call, "releases-argument", _swaps_first_parameter))


def _swaps_first_parameter(callee: Binder) -> bool:
    params = callee.summary.params
    if not params:
        return False
    for stmt in statements(callee.body):
        for target in stmt.targets if isinstance(stmt, ast.Assign) else []:
            if isinstance(target, ast.Attribute) and target.attr == "data" and source_text(target.value) == params[0]:
                return True
    return first_parameter_change(callee) == "free"
