"""Value kinds from use: a parameter or local that the function itself uses as a tensor.

Most real code does not annotate: in `def f(a, w): x = a * 2; ...; y = x @ w` nothing says
`x` or `w` is a tensor, so every rule that needs one (a stream use, a host sync, a release)
stays silent. The function's own code says it, though: only a tensor is an operand of `@`
next to a tensor, the receiver of `copy_` (and what it copies from), `record_stream` or
`data_ptr`, the first argument of `torch.relu`. A scan in source order, before the binder walks the function, finds those
uses and ties each to the binding it reads: the parameter itself, or the value expression
of the `x = value` it last saw. The binder then gives that parameter the tensor kind, and
`ValueKinds.ty` answers "tensor" for that value expression where it knew nothing better, so
every rule sees one kind. A rebinding starts a new binding: what the earlier one was used as
says nothing about it.

Conservative on purpose: `+`, `*`, `len`, `.sum()`, `.view()` prove nothing (ints, lists,
numpy arrays and project classes do those too), a use inside a lambda or comprehension is
not looked at, and a binding the scan saw only in source order (`if c: x = a` ... `else:
x = b`) is tied to the last one, which is what the binder keeps too.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.flow import TRY_NODES, FlowState, walk
from graphlint.checkers.machinery.core.syntax import FUNCTION_NODES, bound_names, child_fields

# Methods and attributes no Python builtin, numpy array or torch module has: their receiver
# is a tensor (or a container of tensors that behaves as one, which the flows treat alike).
EVIDENCE_METHODS = frozenset(
    {
        "copy_",
        "record_stream",
        "resize_",
        "resize_as_",
        "untyped_storage",
        "data_ptr",
        "storage_offset",
        "is_pinned",
        "pin_memory",
        "element_size",
        "new_empty",
        "new_zeros",
        "new_ones",
        "new_full",
        "new_empty_strided",
        "masked_fill_",
        "index_copy_",
        "index_add_",
        "index_fill_",
        "index_put_",
        "scatter_",
        "scatter_add_",
        "masked_scatter_",
        "normal_",
        "uniform_",
        "zero_",
        "unsqueeze",
        "numel",
    }
)
EVIDENCE_ATTRS = frozenset({"is_cuda"})

# torch functions whose first positional argument is not a tensor: factories taking sizes or
# data, sequences of tensors, scalars accepted first, equations, and switches.
_NOT_TENSOR_FIRST = frozenset(
    {
        *(name.rsplit(".", 1)[-1] for name in T.CPU_DEFAULT_FACTORIES),
        *("tensor", "as_tensor", "asarray", "from_numpy", "frombuffer", "from_dlpack", "from_file"),
        *("scalar_tensor", "sparse_coo_tensor", "sparse_csr_tensor", "sparse_csc_tensor"),
        *("sparse_bsr_tensor", "sparse_bsc_tensor", "sparse_compressed_tensor", "normal"),
        *("hann_window", "hamming_window", "bartlett_window", "blackman_window", "kaiser_window"),
        *("tril_indices", "triu_indices", "fftfreq", "rfftfreq", "broadcast_shapes"),
        *("cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack"),
        *("row_stack", "atleast_1d", "atleast_2d", "atleast_3d", "meshgrid", "einsum", "block_diag"),
        *("pow", "float_power", "xlogy", "remainder", "bitwise_and", "bitwise_or", "bitwise_xor"),
        *("bitwise_left_shift", "bitwise_right_shift", "bucketize", "cond", "vmap", "seed", "initial_seed"),
    }
)
_NOT_TENSOR_PREFIXES = ("set_", "get_", "is_", "use_", "enable_", "disable_", "sym_", "has_", "handle_")
# Functions taking a list or tuple of tensors first: each element written there is one.
SEQUENCE_FUNCTIONS = frozenset(
    f"torch.{name}"
    for name in ("cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack")
)
_FIRST_ARG_MODULES = ("torch.", "torch.nn.functional.", "torch.linalg.", "torch.fft.")
# Both operands: a matrix product of two tensors.
_BOTH_TENSORS = frozenset({"torch.matmul", "torch.mm", "torch.bmm", "torch.mv", "torch.dot"})
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def takes_tensor_first(name: str) -> bool:
    """Is the first positional argument of the torch function ``name`` a tensor?"""
    module, _, tail = name.rpartition(".")
    if f"{module}." not in _FIRST_ARG_MODULES or not tail or tail[0] == "_" or tail[0].isupper():
        return False
    if tail in _NOT_TENSOR_FIRST or tail.startswith(_NOT_TENSOR_PREFIXES):
        return False
    return T.is_torch_tensor_function(name)


@dataclass
class TensorUses:
    """What the scan found: parameters read as tensors, and ids of the value expressions of
    the local bindings read as tensors (`x = value`: `id(value)`)."""

    params: set[str] = field(default_factory=set)
    values: set[int] = field(default_factory=set)


def tensor_uses(
    node: ast.FunctionDef | ast.AsyncFunctionDef, params: list[str], resolve: Callable[[ast.AST], str | None]
) -> TensorUses:
    """Scan ``node``'s body for tensor uses of ``params`` (unannotated ones) and of its locals."""
    scan = _Scan(params, resolve)
    walk(scan, node.body)
    return scan.found


class _Scan(FlowState):
    """The source-order scan: the binding each name reads, and the uses that prove a tensor.
    The statement walker takes it through the body once (one pass over each loop), each
    branch after the one before it, so a later binding replaces an earlier one as it did in
    the source."""

    loop_passes = 1

    def __init__(self, params: list[str], resolve: Callable[[ast.AST], str | None]) -> None:
        self.resolve = resolve
        self.current: dict[str, str | int] = {name: name for name in params}
        self.shared: set[str] = set()  # global/nonlocal: bound elsewhere too
        self.found = TensorUses()

    def use(self, node: ast.expr) -> None:
        """``node`` is read as a tensor: so is the binding it reads, when it is a name."""
        if isinstance(node, ast.Name):
            key = self.current.get(node.id)
            if key is None:
                return
            if isinstance(key, str):
                self.found.params.add(key)
            else:
                self.found.values.add(key)

    def bind(self, name: str, value: ast.expr | None) -> None:
        if name in self.shared or value is None:
            self.current.pop(name, None)
        else:
            self.current[name] = id(value)

    def bind_target(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            self.bind(target.id, value)
        else:
            for name in bound_names(target):
                self.bind(name, None)
            if isinstance(target, (ast.Attribute, ast.Subscript)):
                self.expr(target)

    # -- the walker's hooks ----------------------------------------------------------------
    def simple(self, stmt: ast.stmt) -> None:
        handler = _STATEMENTS.get(type(stmt))
        if handler is not None:
            handler(self, stmt)
        else:
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.expr):
                    self.expr(child)

    def header(self, expr: ast.expr, stmt: ast.stmt) -> None:
        """A test, iterable, subject, guard or context manager; a `with` binds each item's
        name before it evaluates the next item (`with a as x, f(x):` reads the new ``x``)."""
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            index = next(i for i, item in enumerate(stmt.items) if item.context_expr is expr)
            if index:
                self.bind_optional(stmt.items[index - 1])
        self.expr(expr)

    def enter_with(self, stmt: ast.With | ast.AsyncWith) -> None:
        self.bind_optional(stmt.items[-1])

    def bind_optional(self, item: ast.withitem) -> None:
        if item.optional_vars is not None:
            self.bind_target(item.optional_vars, None)

    def loop_target(self, stmt: ast.For | ast.AsyncFor) -> None:
        self.bind_target(stmt.target, None)

    def branch(self, stmt: ast.stmt, index: int, start: object) -> None:
        """An `except` binds its name (after its type is evaluated); a `case` its captures."""
        if isinstance(stmt, ast.Match):
            for node in ast.walk(stmt.cases[index].pattern):
                for name in (getattr(node, "name", None), getattr(node, "rest", None)):
                    if name:
                        self.bind(name, None)
        elif isinstance(stmt, TRY_NODES) and index < len(stmt.handlers):
            handler = stmt.handlers[index]
            if handler.type is not None:
                self.expr(handler.type)
            if handler.name:
                self.bind(handler.name, None)

    def definition(self, stmt: ast.stmt) -> None:
        """A nested definition is not scanned: its decorators and defaults are, and its name
        is bound."""
        if not isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
            return
        for decorator in stmt.decorator_list:
            self.expr(decorator)
        if isinstance(stmt, FUNCTION_NODES):
            for default in [*stmt.args.defaults, *(d for d in stmt.args.kw_defaults if d is not None)]:
                self.expr(default)
        self.bind(stmt.name, None)

    def expr(self, node: ast.expr) -> None:
        """Every use in ``node`` that proves a tensor; walrus targets bind."""
        stack: list[ast.AST] = [node]
        while stack:
            current = stack.pop()
            kind = type(current)
            if kind is ast.Lambda:
                continue
            if kind in _COMPREHENSIONS:
                stack.append(current.generators[0].iter)  # type: ignore[attr-defined]
                continue
            if kind is ast.Call:
                self.call(current)  # type: ignore[arg-type]
            elif kind is ast.BinOp and type(current.op) is ast.MatMult:  # type: ignore[attr-defined]
                self.use(current.left)  # type: ignore[attr-defined]
                self.use(current.right)  # type: ignore[attr-defined]
            elif kind is ast.Attribute and current.attr in EVIDENCE_ATTRS:  # type: ignore[attr-defined]
                self.use(current.value)  # type: ignore[attr-defined]
            elif kind is ast.NamedExpr:
                self.bind(current.target.id, current.value)  # type: ignore[attr-defined]
            for name in child_fields(kind):
                value = getattr(current, name)
                if type(value) is list:
                    stack.extend(item for item in value if item is not None)
                elif value is not None:
                    stack.append(value)

    def call(self, call: ast.Call) -> None:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in EVIDENCE_METHODS and isinstance(func.value, ast.Name):
            if self.resolve(func) is None:  # x.copy_(...), not a module's function
                self.use(func.value)
                if func.attr == "copy_" and call.args:
                    self.use(call.args[0])  # `pinned.copy_(act)`: only a tensor is copied from
                return
        first = call.args[0] if call.args else None
        out = T.keyword(call, "out")
        if not (isinstance(first, (ast.Name, ast.List, ast.Tuple)) or isinstance(out, ast.Name)):
            return
        name = self.resolve(func)
        if name is None or not name.startswith("torch."):
            return
        if out is not None and T.is_torch_tensor_function(name):
            self.use(out)
        if isinstance(first, (ast.List, ast.Tuple)):
            if name in SEQUENCE_FUNCTIONS:
                for element in first.elts:
                    self.use(element)
        elif first is not None and takes_tensor_first(name):
            self.use(first)
            if name in _BOTH_TENSORS and len(call.args) > 1:
                self.use(call.args[1])

    # -- statements ----------------------------------------------------------------------
    def assign(self, stmt: ast.Assign) -> None:
        self.expr(stmt.value)
        for target in stmt.targets:
            self.bind_target(target, stmt.value)

    def ann_assign(self, stmt: ast.AnnAssign) -> None:
        if stmt.value is not None:
            self.expr(stmt.value)
            self.bind_target(stmt.target, stmt.value)

    def aug_assign(self, stmt: ast.AugAssign) -> None:
        """`x @= w` reads both as tensors; `x += 1` keeps the binding (the binder does too)."""
        self.expr(stmt.value)
        if isinstance(stmt.op, ast.MatMult):
            self.use(stmt.target)
            self.use(stmt.value)
        if not isinstance(stmt.target, ast.Name):
            self.expr(stmt.target)

    def delete(self, stmt: ast.Delete) -> None:
        for target in stmt.targets:
            self.bind_target(target, None)

    def import_(self, stmt: ast.Import | ast.ImportFrom) -> None:
        for alias in stmt.names:
            self.bind(alias.asname or alias.name.split(".")[0], None)

    def shared_names(self, stmt: ast.Global | ast.Nonlocal) -> None:
        for name in stmt.names:
            self.shared.add(name)
            self.current.pop(name, None)


# The simple statements that bind or prove something; any other reads its expressions.
_STATEMENTS: dict[type, Callable[[_Scan, ast.stmt], None]] = {
    ast.Assign: _Scan.assign,  # type: ignore[dict-item]
    ast.AnnAssign: _Scan.ann_assign,  # type: ignore[dict-item]
    ast.AugAssign: _Scan.aug_assign,  # type: ignore[dict-item]
    ast.Delete: _Scan.delete,  # type: ignore[dict-item]
    ast.Import: _Scan.import_,  # type: ignore[dict-item]
    ast.ImportFrom: _Scan.import_,  # type: ignore[dict-item]
    ast.Global: _Scan.shared_names,  # type: ignore[dict-item]
    ast.Nonlocal: _Scan.shared_names,  # type: ignore[dict-item]
}
