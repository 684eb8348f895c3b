"""Values computed from a graph's static input before its capture.

A capture records kernels, not Python. Whatever the code computed from a static input before
`with torch.cuda.graph(g):` enters the graph as a buffer filled once, at capture. Refreshing the
input before a replay (`graph_inputs["lengths"][:n] = lengths`) does not redo that computation,
so every replay reads what the warm-up batch gave. TGI's decode graphs built their `Seqlen`, whose
constructor takes a cumulative sum of the lengths, before the capture: twice this bug, twice
fixed by building it inside the capture.

One function holds the evidence, so the test is local and deliberately narrow:

- the input is kept where a replay can refresh it (stored in an attribute or a container, or
  returned), which is what makes it a static input and not a constant;
- a value is computed from it before the capture: an arithmetic, comparing or reducing operation
  (a view such as `x[:n]` or `x.view(...)` shares the memory and stays fresh), or the
  constructor of a class that computes from that argument (`derived_args`, per class, decided in
  the project phase since the class is usually in another file);
- the capture reads the value, and nothing keeps the value itself (a kept value can be
  refreshed at replay too).

Statements are taken in the order they are written and each name binding is told apart from
the next (`x = Seqlen(x)` computes from the old `x`), which is enough for the straight-line
set-up code that builds graphs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from graphlint.checkers.machinery.core.names import dotted_parts
from graphlint.checkers.machinery.core.syntax import (
    FUNCTION_NODES,
    bound_names,
    own_expressions,
    statements,
    walk_no_defs,
)

# Reading these of a tensor reads its metadata, never its contents: no computation from it.
_METADATA_ATTRS = frozenset({"shape", "device", "dtype", "ndim", "is_cuda", "layout", "requires_grad"})
_METADATA_METHODS = frozenset({"size", "dim", "numel", "nelement", "element_size", "stride", "get_device", "data_ptr"})
# Views and same-storage conversions: the result is the input's memory, refreshed with it.
_VIEW_METHODS = frozenset(
    {"view", "view_as", "reshape", "narrow", "squeeze", "unsqueeze", "transpose", "permute", "expand", "t"}
    | {"flatten", "unflatten", "select", "detach", "contiguous", "to", "type_as", "as_strided", "movedim"}
)
# Operations whose result is new memory computed from the operands' contents.
_COMPUTING = frozenset(
    {"cumsum", "cumprod", "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "clone"}
    | {"add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "neg", "abs", "exp", "log", "sqrt"}
    | {"rsqrt", "sin", "cos", "clamp", "clip", "maximum", "minimum", "where", "cat", "concat", "stack"}
    | {"sort", "argsort", "topk", "gather", "index_select", "masked_fill", "repeat", "repeat_interleave"}
    | {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not", "diff", "flip", "roll"}
    | {"searchsorted", "bucketize", "bincount", "matmul", "mm", "bmm", "softmax", "outer", "tril", "triu"}
)
# Dtype conversions: a copy when the dtype changes, the same memory when not; a computation
# around one still reads the input's contents.
_CONVERSIONS = frozenset({"int", "long", "float", "half", "bfloat16", "double", "bool", "type"})
_ARITHMETIC = (ast.BinOp, ast.UnaryOp, ast.Compare)
_KEEPING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "register_buffer"})
_INIT_METHODS = ("__init__", "__post_init__")

Binding = tuple[str, int]  # a name and which of its bindings in the function (0: the parameter)
IsSource = Callable[[ast.expr], "str | None"]  # the source an expression is, if it is one
IsTensor = Callable[["ast.expr | None", str], bool]  # a binding's value (None: a parameter), its name


@dataclass(frozen=True)
class Derivation:
    """``name`` is computed from the static input ``source`` by ``stmt``, before the capture."""

    stmt: ast.stmt
    name: str
    source: str
    made_by: str | None = None  # the class whose constructor computes it (None: computed in place)
    args: tuple[str, ...] = ()  # the constructor arguments the input is passed as (`lengths`, `#0`)


@dataclass
class _Walk:
    """What the function does with each binding, in written order."""

    capture: ast.With | ast.AsyncWith
    versions: dict[str, int] = field(default_factory=dict)
    values: dict[Binding, ast.expr] = field(default_factory=dict)  # the value each binding got
    kept: set[Binding] = field(default_factory=set)  # stored bare (or in a literal), or returned
    mentioned: set[Binding] = field(default_factory=set)  # anywhere in a stored or returned value
    read_in_capture: set[Binding] = field(default_factory=set)
    derived: list[tuple[Derivation, Binding, list[Binding]]] = field(default_factory=list)

    def binding(self, name: str) -> Binding:
        return (name, self.versions.get(name, 0))

    def bind(self, name: str, value: ast.expr | None) -> Binding:
        self.versions[name] = self.versions.get(name, 0) + 1
        if value is not None:
            self.values[self.binding(name)] = value
        return self.binding(name)


def stale_derivations(
    function: ast.AST, capture: ast.With | ast.AsyncWith, resolve: Callable[[ast.AST], str | None], is_tensor: IsTensor
) -> list[Derivation]:
    """The values computed from a kept static input before ``capture`` that it reads and nothing
    keeps. ``is_tensor`` says whether an expression (a binding's value, a parameter) is a tensor."""
    walk = _Walk(capture)
    for stmt in statements(getattr(function, "body", [])):
        _visit(walk, stmt, resolve)
    found = []
    for derivation, binding, sources in walk.derived:
        if binding not in walk.read_in_capture or binding in walk.mentioned:
            continue
        if any(source in walk.kept and is_tensor(walk.values.get(source), source[0]) for source in sources):
            found.append(derivation)
    return found


def _visit(walk: _Walk, stmt: ast.stmt, resolve: Callable[[ast.AST], str | None]) -> None:
    inside = walk.capture.lineno < stmt.lineno <= (walk.capture.end_lineno or walk.capture.lineno)
    for node in own_expressions(stmt):
        for load in loaded_names(node):
            if inside:
                walk.read_in_capture.add(walk.binding(load.id))
    _note_kept(walk, stmt)
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        before = stmt.lineno < walk.capture.lineno
        derivation = _derivation(walk, stmt, stmt.targets[0].id, resolve) if before else None
        binding = walk.bind(stmt.targets[0].id, stmt.value)
        if derivation is not None:
            walk.derived.append((derivation[0], binding, derivation[1]))
        return
    for target in _targets(stmt):
        for name in bound_names(target):
            walk.bind(name, stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None)


def _derivation(
    walk: _Walk, stmt: ast.Assign, name: str, resolve: Callable[[ast.AST], str | None]
) -> tuple[Derivation, list[Binding]] | None:
    """The derivation ``stmt`` makes, with the bindings it computes from (before it binds)."""
    value = stmt.value
    computed = computed_from(value, lambda node: node.id if isinstance(node, ast.Name) else None)
    if computed:
        sources = [walk.binding(source) for source in computed]
        return Derivation(stmt, name, computed[0]), sources
    if not isinstance(value, ast.Call):
        return None
    made_by = resolve(value.func)
    if made_by is None or not _constructor_like(value.func):
        return None  # a function may return its argument as it is: only constructors are judged
    passed = _passed_names(value)
    if not passed:
        return None
    sources = [walk.binding(source) for source, _ in passed]
    return Derivation(stmt, name, passed[0][0], made_by, tuple(key for _, key in passed)), sources


def _passed_names(call: ast.Call) -> list[tuple[str, str]]:
    """(name, argument key) for each bare name or view of one passed: `#0` positions, keywords."""
    passed = []
    for index, arg in enumerate(call.args):
        root = _view_root(arg)
        if isinstance(root, ast.Name):
            passed.append((root.id, f"#{index}"))
    for keyword in call.keywords:
        value = _view_root(keyword.value)
        if isinstance(value, ast.Name) and keyword.arg:
            passed.append((value.id, keyword.arg))
    return passed


def _view_root(node: ast.expr) -> ast.expr:
    """`x[:n].view(-1)` -> `x`: what a chain of views is a view of."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _VIEW_METHODS:
            node = node.func.value
        else:
            return node


def computed_from(expr: ast.expr, is_source: IsSource) -> list[str]:
    """The sources whose contents ``expr`` computes new memory from, in order; none unless the
    expression itself is a computation (a bare source or a view of one is the same memory)."""
    if not _computes(expr):
        return []
    found: list[str] = []
    for operand in _operands(expr):
        _collect(operand, is_source, found)
    return found


def _collect(node: ast.expr, is_source: IsSource, found: list[str]) -> None:
    source = is_source(node)
    if source is not None:
        if source not in found:
            found.append(source)
        return
    if isinstance(node, ast.Attribute) and node.attr in _METADATA_ATTRS:
        return
    if _computes(node) or _is_view(node, _CONVERSIONS) or isinstance(node, (ast.List, ast.Tuple, ast.Starred)):
        for operand in _operands(node):
            _collect(operand, is_source, found)


def _computes(node: ast.expr) -> bool:
    if isinstance(node, _ARITHMETIC):
        return True
    if not isinstance(node, ast.Call):
        return False
    parts = dotted_parts(node.func) or []
    if parts[:1] == ["torch"] and parts[-1] in _COMPUTING:
        return True
    return isinstance(node.func, ast.Attribute) and node.func.attr in _COMPUTING and parts[:1] != ["torch"]


def _is_view(node: ast.expr, also: frozenset[str] = frozenset()) -> bool:
    """A subscript or view method of something (and, with ``also``, those methods too)."""
    if isinstance(node, ast.Subscript):
        return True
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    return node.func.attr in _VIEW_METHODS or node.func.attr in also


def _operands(node: ast.expr) -> Iterator[ast.expr]:
    """What an operation reads: both sides, the receiver and the arguments (not `out=`)."""
    if isinstance(node, ast.BinOp):
        yield from (node.left, node.right)
    elif isinstance(node, ast.UnaryOp):
        yield node.operand
    elif isinstance(node, ast.Compare):
        yield from (node.left, *node.comparators)
    elif isinstance(node, ast.Subscript):
        yield node.value
    elif isinstance(node, (ast.List, ast.Tuple)):
        yield from node.elts
    elif isinstance(node, ast.Starred):
        yield node.value
    elif isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute) and (dotted_parts(node.func) or [""])[0] != "torch":
            if node.func.attr in _METADATA_METHODS:
                return
            yield node.func.value
        yield from (arg for arg in node.args)
        yield from (keyword.value for keyword in node.keywords if keyword.arg != "out")


def loaded_names(node: ast.AST) -> Iterator[ast.Name]:
    """The names ``node`` reads, outside nested definitions."""
    return (n for n in walk_no_defs(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def _targets(stmt: ast.stmt) -> list[ast.expr]:
    if isinstance(stmt, ast.Assign):
        return stmt.targets
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        return [stmt.target]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [item.optional_vars for item in stmt.items if item.optional_vars is not None]
    return []


def _note_kept(walk: _Walk, stmt: ast.stmt) -> None:
    """Bindings a statement keeps beyond the function: stored into an attribute or a container
    slot, handed to a container's `append`/`update`..., or returned."""
    stored: list[ast.expr] = []
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if any(_stores(target) for target in targets):
            stored.append(stmt.value)
    elif isinstance(stmt, ast.Return) and stmt.value is not None:
        stored.append(stmt.value)
    elif isinstance(stmt, ast.Expr):
        stored.extend(_handed_to_containers(stmt.value))
    for value in stored:
        walk.kept.update(walk.binding(name) for name in _held(value))
        walk.mentioned.update(walk.binding(name) for name in _held(value, into_objects=True))


def _stores(target: ast.expr) -> bool:
    """Does an assignment target outlive the function (`self.x`, `slots[i]`, `a, self.b`)?"""
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_stores(element) for element in target.elts)
    return isinstance(target, (ast.Attribute, ast.Subscript))


def _handed_to_containers(value: ast.expr) -> Iterator[ast.expr]:
    if isinstance(value, (ast.Yield, ast.YieldFrom)) and value.value is not None:
        yield value.value
    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        if value.func.attr in _KEEPING_METHODS:
            yield from value.args
            yield from (keyword.value for keyword in value.keywords)


def _held(value: ast.expr, into_objects: bool = False) -> Iterator[str]:
    """Names a stored value holds as they are: bare, or in a literal dict, list or tuple; with
    ``into_objects``, also as the arguments of a constructor (`State(meta)` may hold `meta`)."""
    if isinstance(value, ast.Name):
        yield value.id
    elif isinstance(value, ast.Dict):
        for item in value.values:
            yield from _held(item, into_objects)
    elif isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        for item in value.elts:
            yield from _held(item.value if isinstance(item, ast.Starred) else item, into_objects)
    elif into_objects and isinstance(value, ast.Call) and _constructor_like(value.func):
        for arg in (*value.args, *(keyword.value for keyword in value.keywords)):
            yield from _held(arg.value if isinstance(arg, ast.Starred) else arg, into_objects)


def _constructor_like(func: ast.expr) -> bool:
    """`State(...)`, `mod.State(...)`, `dict(...)`: a call whose result may hold its arguments."""
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name[:1].isupper() or name in ("dict", "list", "tuple", "SimpleNamespace")


# -- the constructor side: which arguments a class computes from -----------------------------


def derived_args(classes: list[ast.ClassDef]) -> frozenset[str]:
    """The constructor arguments (names, and `#i` positions) whose contents the class computes
    new tensors from in `__init__` or a dataclass's `__post_init__`, over every definition of it
    (a class defined in both branches of an `if` may be either)."""
    found: set[str] = set()
    for cls in classes:
        for method in cls.body:
            if isinstance(method, FUNCTION_NODES) and method.name in _INIT_METHODS:
                found |= _init_derived(cls, method)
    return frozenset(found)


def _init_derived(cls: ast.ClassDef, method: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    if method.name == "__init__":
        params = [a.arg for a in (*method.args.posonlyargs, *method.args.args)][1:] + [
            a.arg for a in method.args.kwonlyargs
        ]
    else:  # __post_init__ reads the dataclass's fields through self
        params = [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    # A local name or `self.attr` -> the argument it holds (`__post_init__` reads fields as `self.f`).
    aliases = {(param if method.name == "__init__" else f"self.{param}"): param for param in params}
    found: set[str] = set()
    for stmt in statements(method.body):
        for node in own_expressions(stmt):
            covered: set[int] = set()  # inside a computation already asked: its operands were read
            for expr in walk_no_defs(node):
                if isinstance(expr, ast.expr) and id(expr) not in covered and _computes(expr):
                    found.update(computed_from(expr, lambda n: _alias_of(n, aliases)))
                    covered.update(id(inner) for inner in ast.walk(expr))
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            source = _alias_of(_view_root(stmt.value), aliases)
            key = _held_key(stmt.targets[0])
            if source is not None and key is not None:
                aliases[key] = source
    positions = {f"#{index}" for index, param in enumerate(params) if param in found}
    return found | positions


def _alias_of(node: ast.expr, aliases: dict[str, str]) -> str | None:
    key = _held_key(node)
    return aliases.get(key) if key is not None else None


def _held_key(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    parts = dotted_parts(node) if isinstance(node, ast.Attribute) else None
    return ".".join(parts) if parts and parts[0] == "self" and len(parts) == 2 else None
