"""Naming what a call runs, as far as one file can tell: call targets for the project phase.

A part the binder (`FunctionWalker`) owns: it reads the binder's value kinds and names through
`NamingScope`, the narrow view it needs, and builds the `call_targets` the project phase
resolves; captured callables (make_graphed_callables, torch.compile in a cudagraph mode) become
`EntryRef`s, and calls in a capture region that cannot be named are kept as `OpaqueCall`s for
`graphlint captures`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.call_targets import (
    ArgValue,
    CallTarget,
    ClassArg,
    DuckCall,
    FunctionTarget,
    InstanceCall,
    MethodTarget,
    ParamArg,
    ParamCall,
    ParamMethodCall,
    SuperCall,
    ValueCall,
)
from graphlint.checkers.machinery.core.kind_inference import GRAPHED_CALLABLES, is_compile_capture
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH, EntryRef, FunctionSummary, OpaqueCall
from graphlint.checkers.machinery.core.names import LIBRARY_ROOTS, dotted_parts

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import ModuleState

_LIBRARY_PREFIXES = ("torch.", "numpy.", "math.", "os.", "sys.")


class NamingScope(Protocol):
    """What naming a call needs of its function's binder: the kinds and names it knows, the
    functions it and its enclosing functions define, and where entries and opaque calls go."""

    st: ModuleState
    qualname: str
    display: str
    class_qualname: str | None
    record: bool
    summary: FunctionSummary
    regions: tuple[int, ...]
    local_defs: dict[str, str]
    duck_attrs: dict[str, frozenset[str]]  # receiver -> attributes a `hasattr` test showed it has

    def ty(self, node: ast.AST | None) -> T.Ty | None: ...

    def resolve(self, node: ast.AST) -> str | None: ...

    def lookup(self, name: str) -> T.Ty | None: ...

    def chain(self) -> Iterator[NamingScope]: ...


class CallNaming:
    """The binder's naming of call targets (see the module docstring)."""

    def __init__(self, scope: NamingScope) -> None:
        self.w = scope

    def call_target(self, call: ast.Call) -> CallTarget | None:
        func = call.func
        if isinstance(func, ast.Name):
            return self._name_target(func)
        if isinstance(func, ast.Attribute):
            return self._attribute_target(func)
        if isinstance(func, ast.Subscript):
            container = self.w.ty(func.value)
            if container is not None and container.element:
                return InstanceCall(container.element)
        return None

    def value_call(self, call: ast.Call) -> ValueCall | None:
        """A call `call_target` cannot name, left to the value flow; not a call of a library
        function or of a method of a value whose kind is known (a tensor's, a stream's)."""
        func = call.func
        if isinstance(func, ast.Attribute) and self.w.ty(func.value) is not None:
            return None
        name = self.w.resolve(func)
        if name is not None and (name.partition(".")[0] in LIBRARY_ROOTS or "." not in name):
            return None
        return ValueCall(self.w.qualname, *self.w.st.span(call))

    def _name_target(self, func: ast.Name) -> CallTarget | None:
        for walker in self.w.chain():
            if func.id in walker.local_defs:
                return FunctionTarget(walker.local_defs[func.id])
        ty = self.w.lookup(func.id)
        if ty is not None:
            return _value_target(ty)
        if func.id in self.w.summary.params:
            return ParamCall(func.id)
        name = self.w.resolve(func)
        if name is None or "." not in name:
            return None
        return FunctionTarget(name)

    def _attribute_target(self, func: ast.Attribute) -> CallTarget | None:
        value = func.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
            return SuperCall(self.w.class_qualname, func.attr) if self.w.class_qualname else None
        receiver = self.w.ty(value)
        if receiver is not None:
            if receiver.kind == T.INSTANCE and receiver.ref:
                return MethodTarget(receiver.ref, func.attr)
            return None
        written = _receiver_key(value) if self.w.duck_attrs else None
        shown = self.w.duck_attrs.get(written) if written is not None else None
        if written is not None and shown:  # `if hasattr(module, "need_dw"): module.backward_dw()`
            return DuckCall(func.attr if func.attr in shown else min(shown), func.attr, written)
        if isinstance(value, ast.Name) and value.id in self.w.summary.params:
            return ParamMethodCall(value.id, func.attr)
        name = self.w.resolve(func)
        if name is not None and not name.startswith(_LIBRARY_PREFIXES):
            return FunctionTarget(name)
        return None

    def typed_args(self, call: ast.Call) -> tuple[tuple[str, ArgValue], ...]:
        """Arguments whose class is known, so a callee's parameter calls can be resolved."""
        typed: list[tuple[str, ArgValue]] = []
        keyed = [(str(i), a) for i, a in enumerate(call.args) if not isinstance(a, ast.Starred)]
        keyed += [(kw.arg, kw.value) for kw in call.keywords if kw.arg]
        for key, value in keyed:
            ty = self.w.ty(value)
            if ty is not None and ty.kind == T.INSTANCE and ty.ref:
                typed.append((key, ClassArg(ty.ref)))
            elif ty is None and isinstance(value, ast.Name) and value.id in self.w.summary.params:
                typed.append((key, ParamArg(value.id)))
        return tuple(typed)

    def callable_target(self, node: ast.expr) -> CallTarget | None:
        """What calling ``node`` runs: a function, an instance's forward, a bound method."""
        ty = self.w.ty(node)
        if ty is not None:
            found = _value_target(ty)
            if found is None and ty.element:
                return InstanceCall(ty.element)
            return found
        if isinstance(node, ast.Attribute):
            receiver = self.w.ty(node.value)
            if receiver is not None and receiver.kind == T.INSTANCE and receiver.ref:
                return MethodTarget(receiver.ref, node.attr)
        if isinstance(node, ast.Name):
            for walker in self.w.chain():
                if node.id in walker.local_defs:
                    return FunctionTarget(walker.local_defs[node.id])
        name = self.w.resolve(node)
        return FunctionTarget(name) if name else None

    # -- captured callables ------------------------------------------------------------------
    def note_entries(self, call: ast.Call, name: str | None) -> None:
        """make_graphed_callables(f), torch.compile(f, mode=...), model.compile(mode=...)."""
        if name in GRAPHED_CALLABLES:
            first = call.args[0] if call.args else T.keyword(call, "callables") or T.keyword(call, "modules")
            if first is not None:
                self._entry_targets(first, call, "graphed")
        elif name == "torch.compile" and call.args and is_compile_capture(call):
            self._entry_targets(call.args[0], call, COMPILE)
        elif (
            isinstance(call.func, ast.Call)
            and call.args
            and self.w.resolve(call.func.func) == "torch.compile"
            and not call.func.args
            and is_compile_capture(call.func)
        ):
            self._entry_targets(call.args[0], call, COMPILE)  # torch.compile(mode="reduce-overhead")(step)
        elif isinstance(call.func, ast.Attribute) and call.func.attr == "compile" and is_compile_capture(call):
            receiver = self.w.ty(call.func.value)
            if receiver is not None and receiver.kind == T.INSTANCE:
                self._entry_targets(call.func.value, call, COMPILE)

    def _entry_targets(self, node: ast.expr, call: ast.Call, kind: str) -> None:
        elements = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
        if isinstance(node, ast.Call) and self.w.resolve(node.func) in ("tuple", "list") and node.args:
            container = self.w.ty(node.args[0])
            if container is not None and container.element:
                self._add_entry(InstanceCall(container.element), call, kind)
            return
        for element in elements:
            target = self.callable_target(element)
            if target is not None:
                self._add_entry(target, call, kind)
            elif self.w.record:
                self.opaque(element, call, COMPILE if kind == COMPILE else GRAPH)
                self._add_entry(ValueCall(self.w.qualname, *self.w.st.span(element)), call, kind)  # the value flow's

    def _add_entry(self, target: CallTarget, call: ast.Call, kind: str) -> None:
        if self.w.record:
            region_kind = COMPILE if kind == COMPILE else GRAPH
            self.w.st.summary.entries.append(EntryRef(target, call.lineno, region_kind, self.w.display, True))

    def opaque(self, callee: ast.expr, call: ast.Call, kind: str) -> None:
        """Remember a callable graphlint cannot name, for `graphlint captures` (not library calls)."""
        name = self.w.resolve(callee)
        if name is not None and (name.partition(".")[0] in LIBRARY_ROOTS or "." not in name):
            return
        text = ast.unparse(callee)
        parameter = isinstance(callee, ast.Name) and callee.id in self.w.summary.params
        self.w.st.summary.opaque.append(
            OpaqueCall(text[:80], call.lineno, self.w.regions, kind, self.w.display, parameter)
        )


def _value_target(ty: T.Ty) -> CallTarget | None:
    """What calling a value of kind ``ty`` runs: an instance's forward, a bound method."""
    if ty.kind == T.INSTANCE and ty.ref:
        return InstanceCall(ty.ref)
    if ty.kind == T.FUNCTION and ty.ref and ty.method:
        return MethodTarget(ty.ref, ty.method)
    return None


def _receiver_key(node: ast.expr) -> str | None:
    """A receiver `hasattr` facts are kept under: a name or an attribute chain (`self.module`)."""
    parts = dotted_parts(node)
    return ".".join(parts) if parts else None


def hasattr_facts(test: ast.expr) -> dict[str, frozenset[str]]:
    """What ``test`` being true shows: `hasattr(x, "a")`, alone or among the operands of an `and`."""
    found: dict[str, set[str]] = {}
    for operand in test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]:
        if (
            isinstance(operand, ast.Call)
            and isinstance(operand.func, ast.Name)
            and operand.func.id == "hasattr"
            and len(operand.args) == 2
            and isinstance(operand.args[1], ast.Constant)
            and isinstance(operand.args[1].value, str)
        ):
            key = _receiver_key(operand.args[0])
            if key is not None:
                found.setdefault(key, set()).add(operand.args[1].value)
    return {key: frozenset(attrs) for key, attrs in found.items()}
