"""The stream flow's bindings: what `name = value` makes the name hold, and what it frees.

A part `stream_flow.StreamFlow` owns (its ``bindings``): through `BindingsHost`, the view of the
flow it needs, it reads the flow's walker (`w`), tensor state (`tensors`), current stream and
clock, and calls back `check_free` for the memory a rebinding, a `del` or the end of the
function really frees (`tensor_state` says which).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core import tensor_values as V
from graphlint.checkers.machinery.core.syntax import own_expressions, statements
from graphlint.checkers.machinery.flows.stream.tensor_state import Binding, Storage, TensorState, escape, new_storage

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import Binder
    from graphlint.checkers.machinery.flows.stream.stream_calls import StreamCalls


class BindingsHost(Protocol):
    """The stream flow as its bindings see it: the walker, the clock and current stream, what
    each name holds, and the flow's answers when a binding frees, rebinds or writes an element."""

    w: Binder
    tensors: TensorState
    current: list[str]
    plain: set[str]
    untracked: dict[str, tuple[str, int]]  # name -> (stream, position) of a binding not tracked
    unpacked: dict[str, frozenset[str]]  # name -> the names some `a, b = ...` bound with it
    params: set[str]
    lists: set[str]  # names bound to fresh lists (list_elements)
    calls: StreamCalls  # the same-file function a call runs (`StreamCalls.callee`)

    def tick(self) -> int: ...

    def check_free(self, storage: Storage, name: str, stmt: ast.stmt | None, now: int) -> None: ...

    def rebound(self, name: str, value: ast.AST | None) -> None: ...

    def element_written(self, target: ast.Subscript, made: Binding | None, stmt: ast.stmt) -> None: ...

    def allocating_stream(self, value: ast.AST) -> str: ...


class StreamBindings:
    """Bindings and releases for the stream flow (see the module docstring)."""

    def __init__(self, flow: BindingsHost) -> None:
        self.flow = flow

    # -- what a value is -------------------------------------------------------------------
    def made_by(self, value: ast.AST | None, name: str, now: int) -> Binding | None:
        """What ``name = value`` makes ``name`` hold (None: nothing this flow tracks)."""
        if value is None:
            return None
        if isinstance(value, ast.NamedExpr):
            return self.made_by(value.value, name, now)
        if isinstance(value, (ast.IfExp, ast.BoolOp)):  # `x if c else x[1:]`, `a or b`: either
            parts = [value.body, value.orelse] if isinstance(value, ast.IfExp) else value.values
            return _either([self.made_by(part, name, now) for part in parts])
        if isinstance(value, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            elements = value.values if isinstance(value, ast.Dict) else value.elts
            return self._holder(name, elements, now)
        if isinstance(value, ast.Call) and V.is_holder_call(value, self.flow.w.resolve, self.flow.w.ty(value)):
            return self._holder(name, [*value.args, *(kw.value for kw in value.keywords)], now)
        if isinstance(value, ast.Call) and (returned := self._returned_arguments(value)):
            return _either([self.made_by(argument, name, now) for argument in returned])
        root = V.view_root(value, self.flow.w.resolve)  # type: ignore[arg-type]
        if root is not value or isinstance(value, ast.Name):
            return self._view(root, name, now, part=root is not value, value=value)
        if isinstance(value, ast.Attribute):
            return self.external(name, now) if self._is_tensor_value(value) else None
        if not self._is_tensor_value(value):
            return None
        stream = self.flow.allocating_stream(value)
        storage = new_storage(name, stream)
        if isinstance(value, ast.Call) and not (self.flow.w.resolve(value.func) or "").startswith("torch."):
            # model(x), helper(x): the result may be `x` itself or keep it, so if it escapes, so does `x`.
            storage.sources = self._storages_of(V.argument_names(value))
        empty = V.is_empty_allocation(value, self.flow.w.resolve)  # type: ignore[arg-type]
        return Binding([storage], [] if empty else [(stream, now)])

    def _view(self, root: ast.expr, name: str, now: int, part: bool, value: ast.AST | None = None) -> Binding | None:
        """`y = x`, `y = x[1:].view(n, -1)`, a row or a split of `x` (``part``): the memory of
        ``root``, or memory held elsewhere."""
        if isinstance(root, ast.Name) and root.id in self.flow.tensors:
            base = self.flow.tensors[root.id]
            storages = base.storages
            if base.holder and part:  # pair[0]: one of what the holder holds
                storages = [content for storage in storages for content in storage.contents]
            return Binding(list(storages), list(base.producers)) if storages else None
        if isinstance(root, (ast.Name, ast.Attribute)):  # a parameter, `self.buf`, a global
            if not self._is_tensor_value(value or root):
                return None
            if part and isinstance(root, ast.Name) and root.id in self.flow.untracked:
                # `k = k_ag.view(n, -1)`: a view writes nothing; its data is what the binding
                # of `k_ag` (a parameter, a call's result) held, made then and there.
                stream, made = self.flow.untracked[root.id]
                storage = new_storage(name, stream, owned=False, made_here=made > 0)  # 0: a parameter
                return Binding([storage], [(stream, made)])
            return self.external(name, now)
        return self.made_by(root, name, now)  # a view of a temporary: `torch.randn(n).view(...)`

    def external(self, name: str, now: int) -> Binding:
        """A tensor whose memory someone else holds: releasing the name frees nothing."""
        stream = self.flow.current[-1]
        return Binding([new_storage(name, stream, owned=False, made_here=False)], [(stream, now)])

    def _holder(self, name: str, elements: Sequence[ast.expr | None], now: int) -> Binding | None:
        contents: list[Storage] = []
        for element in elements:
            if isinstance(element, ast.Starred):
                element = element.value
            made = self.made_by(element, name, now) if element is not None else None
            if made is not None:
                contents.extend(made.storages)
        if not contents:
            return None
        holder = new_storage(name, self.flow.current[-1], holder=True)
        holder.contents = contents
        return Binding([holder], [])

    def _storages_of(self, names: list[str]) -> list[Storage]:
        return [storage for name in names if name in self.flow.tensors for storage in self.flow.tensors[name].storages]

    def _is_tensor_value(self, value: ast.AST) -> bool:
        """Device tensors computed here; host data and values of unknown origin are not tracked."""
        if isinstance(value, ast.Name) and value.id in self.flow.tensors:
            return not self.flow.tensors[value.id].holder
        ty = self.flow.w.ty(value)
        if ty is not None:
            return ty.kind in (T.TENSOR, T.MASK)
        if isinstance(value, ast.BinOp):
            return self._is_tensor_value(value.left) or self._is_tensor_value(value.right)
        if isinstance(value, ast.Call):  # model(x): a call on device tensors gives a device tensor
            name = self.flow.w.resolve(value.func)
            if name is not None and (name.startswith("torch.") or "." not in name):
                return False  # torch's own non-tensor results (work handles, events), builtins
            if self._returns_host(value):
                return False
            return any(self._is_tensor_value(arg) for arg in value.args)
        return False

    def _method(self, call: ast.Call) -> Binder | None:
        """The walker of `self.method(...)` when the method is defined in this class."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"):
            return None
        summary = self.flow.w.st.summary.classes.get(self.flow.w.class_qualname or "")
        qualname = summary.methods.get(func.attr) if summary is not None else None
        walker = next((w for w in self.flow.w.st.walkers if w.qualname == qualname), None)
        if walker is None or not isinstance(walker.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        return walker

    def _returns_host(self, call: ast.Call) -> bool:
        """`self._gather(...)`, `stage_pinned(ids)`: a method of this class or a function of this
        file whose every return is host memory (a pinned staging buffer)."""
        walker = self._method(call) or self.flow.calls.callee(call)
        values = [stmt.value for stmt in _returns(walker.node.body)] if walker is not None else []  # type: ignore[attr-defined]
        kinds = [walker.ty(value) for value in values if value is not None] if walker is not None else []
        return bool(values) and len(kinds) == len(values) and all(k is not None and k.kind == T.HOST for k in kinds)

    def _returned_arguments(self, call: ast.Call) -> list[ast.expr]:
        """`self._input(x, route)` whose every return is (a view of) a parameter: the arguments
        passed for those parameters (`return x[1:]` / `return x`: a view of the caller's `x`)."""
        walker = self._method(call)
        if walker is None:
            return []
        node = walker.node
        params = [arg.arg for arg in [*node.args.posonlyargs, *node.args.args]]  # type: ignore[attr-defined]
        if params[:1] in (["self"], ["cls"]):
            params = params[1:]
        passed = {param: arg for param, arg in zip(params, call.args, strict=False)}
        passed.update({kw.arg: kw.value for kw in call.keywords if kw.arg is not None})
        found: list[ast.expr] = []
        for stmt in _returns(node.body):  # type: ignore[attr-defined]
            root = V.view_root(stmt.value, walker.resolve) if stmt.value is not None else None
            if not isinstance(root, ast.Name) or root.id not in passed:
                return []
            found.append(passed[root.id])
        return found

    # -- binding -------------------------------------------------------------------------
    def rebind(self, name: str, binding: Binding | None, stmt: ast.stmt, now: int) -> None:
        """``name`` now holds ``binding``; the memory it held before may be freed."""
        old = self.flow.tensors.pop(name, None)
        if binding is None:
            self.flow.untracked[name] = (self.flow.current[-1], now)
        else:
            self.flow.untracked.pop(name, None)
        if binding is not None:
            binding.local = name not in self.flow.w.globals
            for storage in binding.storages:
                storage.names.add(name)
            self.flow.tensors[name] = binding
        if old is not None and name not in self.flow.params:
            for storage in self.flow.tensors.freed(old):
                self.flow.check_free(storage, name, stmt, now)

    def unpack(self, target: ast.Tuple | ast.List, value: ast.AST | None, stmt: ast.stmt) -> None:
        """`a, b = ...`: each name gets its own part, all computed before any is bound."""
        now = self.flow.tick()
        parts = self._parts(target, value, now)
        together = frozenset(element.id for element in target.elts if isinstance(element, ast.Name))
        for name in together:
            self.flow.unpacked[name] = self.flow.unpacked.get(name, frozenset()) | together
        for element, made in zip(target.elts, parts, strict=True):
            if isinstance(element, ast.Starred):
                element, made = element.value, _rest(made)
            if isinstance(element, ast.Name):
                plain = element.id in self.flow.plain and made is None
                self.rebind(element.id, made, stmt, now)
                self.flow.rebound(element.id, None)
                self.flow.lists.discard(element.id)
                if plain:
                    self.flow.plain.add(element.id)  # `out, layout = f(x, layout)`: still a string
            elif isinstance(element, ast.Subscript):
                self.flow.element_written(element, made, stmt)
            elif isinstance(element, (ast.Tuple, ast.List)):
                self.unpack(element, None, stmt)

    def _parts(self, target: ast.Tuple | ast.List, value: ast.AST | None, now: int) -> list[Binding | None]:
        names = [element.id if isinstance(element, ast.Name) else "_" for element in target.elts]
        starred = any(isinstance(element, ast.Starred) for element in target.elts)
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(names) and not starred:
            return [self.made_by(part, name, now) for part, name in zip(value.elts, names, strict=True)]
        mapped = _views_over(value, len(names), self.flow.w.resolve)
        if mapped is not None:  # `k, v = [x[a:b] for x in [k, v]]`: each a view of its own
            return [
                self._view(element, name, now, part=True) if isinstance(element, ast.Name) else None
                for element, name in zip(mapped, names, strict=True)
            ]
        made = _call_over(value, len(names))
        if made is not None and any(self._is_tensor_value(element) for element in made[1]):
            # `q, k = [quantize(x, fmt) for x in (q, k)]`, over a zip of lists too: new tensors
            return [self._fresh(made[0], name, now) for name in names]
        base = V.splits(value, self.flow.w.resolve) if isinstance(value, ast.expr) else None  # type: ignore[arg-type]
        if isinstance(value, ast.Name) and value.id in self.flow.tensors:
            base = value  # rows of a tensor, or the contents of a holder
        if base is not None:
            return [self._view(base, name, now, part=True) for name in names]
        if not isinstance(value, ast.Call) or not self._is_tensor_value(value):
            return [None] * len(names)
        # `q, k = self.rotary(pos, q, k)`: new tensors, except names that held Python values and
        # come back (`out, layout = f(x, layout)`: a string stays a string).
        passed = set(V.argument_names(value))
        return [None if name in passed and name in self.flow.plain else self._fresh(value, name, now) for name in names]

    def _fresh(self, value: ast.Call, name: str, now: int) -> Binding:
        stream = self.flow.current[-1]
        storage = new_storage(name, stream)
        if not (self.flow.w.resolve(value.func) or "").startswith("torch."):
            storage.sources = self._storages_of(V.argument_names(value))
        return Binding([storage], [(stream, now)])

    def loop_binding(self, target: ast.expr, iterable: ast.expr, now: int) -> Binding | None:
        """`for t in (x, y)`: t may be either; `for row in x`: a view of x."""
        if not isinstance(target, ast.Name):
            return None
        if isinstance(iterable, (ast.Tuple, ast.List)):
            return _either([self.made_by(element, target.id, now) for element in iterable.elts])
        if isinstance(iterable, ast.Name) and iterable.id in self.flow.tensors:
            return self._view(iterable, target.id, now, part=True)
        return None

    def escape(self, value: ast.AST) -> None:
        """`return x`, `self.a = x`, `queue.append(x)`: x (and what made it) lives on."""
        for node in ast.walk(value):
            if isinstance(node, ast.Name) and node.id in self.flow.tensors:
                escape(self.flow.tensors[node.id].storages)


def _either(bindings: list[Binding | None]) -> Binding | None:
    found = [binding for binding in bindings if binding is not None]
    if not found:
        return None
    storages: list[Storage] = []
    for binding in found:
        storages.extend(s for s in binding.storages if all(s.ident != t.ident for t in storages))
    producers = list(dict.fromkeys(p for binding in found for p in binding.producers))
    return Binding(storages, producers)


def _returns(body: list[ast.stmt]) -> list[ast.Return]:
    return [stmt for stmt in statements(body) if isinstance(stmt, ast.Return)]


def _rest(made: Binding | None) -> Binding | None:
    """`out, *rest = kernel(x)`: ``rest`` is a list holding what the call made."""
    if made is None:
        return None
    holder = new_storage("*", made.storages[0].alloc_stream if made.storages else "", holder=True)
    holder.contents = list(made.storages)
    return Binding([holder], list(made.producers))


def _views_over(value: ast.AST | None, count: int, resolve: Callable) -> list[ast.expr] | None:
    """`[x[a:b] for x in [k, v]]`, `[x.movedim(0, 1).contiguous() for x in (k, v)]`: a view
    of each of ``count`` listed values, in order (their expressions), else None."""
    loop = _one_loop(value)
    if loop is None or not isinstance(loop.target, ast.Name):
        return None
    if not isinstance(loop.iter, (ast.List, ast.Tuple)) or len(loop.iter.elts) != count:
        return None
    root = V.view_root(value.elt, resolve)  # type: ignore[union-attr]
    if not (isinstance(root, ast.Name) and root.id == loop.target.id):
        return None
    return list(loop.iter.elts)


def _call_over(value: ast.AST | None, count: int) -> tuple[ast.Call, list[ast.expr]] | None:
    """`[f(x) for x in (a, b)]`, `[g(x, data=y) for x, y in zip([a, b], [c, d])]`: one call
    per listed value, ``count`` of them: the call, and every value listed."""
    loop = _one_loop(value)
    if loop is None or not isinstance(value.elt, ast.Call):  # type: ignore[union-attr]
        return None
    lists = [loop.iter]
    if isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Name) and loop.iter.func.id == "zip":
        lists = list(loop.iter.args)
    if not lists or not all(isinstance(part, (ast.List, ast.Tuple)) and len(part.elts) == count for part in lists):
        return None
    return value.elt, [element for part in lists for element in part.elts]  # type: ignore[union-attr, attr-defined]


def _one_loop(value: ast.AST | None) -> ast.comprehension | None:
    if not (isinstance(value, ast.ListComp) and len(value.generators) == 1):
        return None
    loop = value.generators[0]
    return None if loop.ifs or loop.is_async else loop


# Calls whose first argument can only be a tensor: what torch.distributed reduces, gathers,
# sends or receives into.
_TENSOR_FIRST = frozenset(
    {
        "all_reduce",
        "reduce",
        "broadcast",
        "all_gather_into_tensor",
        "reduce_scatter_tensor",
        "all_to_all_single",
        "send",
        "recv",
        "isend",
        "irecv",
    }
)
_TENSOR_METHODS = frozenset({"copy_", "record_stream", "untyped_storage", "data_ptr"})  # only tensors have them


def tensors_by_use(walker: Binder) -> frozenset[str]:
    """Names the function uses as tensors only a tensor can be: handed first to a collective
    (`dist.all_reduce(g)`) or called with a tensor-only method (`g.copy_(x)`). A name bound
    to a call the flow cannot see into (`g = self._store.flat_grads()`) is a tensor then."""
    found: set[str] = set()
    for stmt in statements(walker.body):
        for node in (node for part in own_expressions(stmt) for node in ast.walk(part)):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _TENSOR_METHODS and isinstance(func.value, ast.Name):
                found.add(func.value.id)
            name = walker.resolve(func) or ""
            first = node.args[0] if node.args else None
            if name.startswith("torch.distributed.") and name.rsplit(".", 1)[-1] in _TENSOR_FIRST:
                if isinstance(first, ast.Name):
                    found.add(first.id)
    return frozenset(found)
