"""Value kinds for the file phase: what an expression evaluates to (tensor, host tensor,
mask, Python value, stream, optimizer, module instance, ...), given a walker's bindings.

A part the binder (`FunctionWalker`) owns: it is handed the walker's bindings (`lookup`), names
(`resolve`) and the module's class knowledge (`state`), and memoises until the walker says the
bindings changed (`forget`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.tensor_values import is_str_expr

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.module_state import ModuleState

GRAPHED_CALLABLES = frozenset(
    {"torch.cuda.make_graphed_callables", "transformer_engine.pytorch.make_graphed_callables"}
)
_CUDAGRAPH_MODES = frozenset({"reduce-overhead", "max-autotune"})
T_TREE = T.Ty(T.GRAPHED, tree=True)
_MODULE_ONLY_METHODS = frozenset({"eval", "train"})
_MODULE_CHAINING = frozenset(
    {"cuda", "to", "eval", "train", "half", "float", "bfloat16", "double", "requires_grad_", "cpu", "type", "to_empty"}
)


def is_compile_capture(call: ast.Call) -> bool:
    """torch.compile(..., mode="reduce-overhead"|"max-autotune" | options={"triton.cudagraphs": True})."""
    mode = T.keyword(call, "mode")
    if isinstance(mode, ast.Constant) and mode.value in _CUDAGRAPH_MODES:
        return True
    options = T.keyword(call, "options")
    if isinstance(options, ast.Dict):
        for key, value in zip(options.keys, options.values, strict=False):
            if isinstance(key, ast.Constant) and key.value == "triton.cudagraphs" and T.is_true(value):
                return True
    return False


def is_cudagraph_compile(resolve: Callable[[ast.AST], str | None], node: ast.AST) -> bool:
    """`torch.compile(..., mode=...)` in a CUDA-graph mode, however torch is imported."""
    return isinstance(node, ast.Call) and resolve(node.func) == "torch.compile" and is_compile_capture(node)


class ValueKinds:
    """The value kinds of one walker's expressions (see the module docstring)."""

    def __init__(
        self,
        state: ModuleState,
        resolve: Callable[[ast.AST], str | None],
        lookup: Callable[[str], T.Ty | None],
        owner: str | None = None,
    ) -> None:
        self.st = state
        self.resolve = resolve
        self.lookup = lookup
        self.owner = owner  # the class whose method this is: what a classmethod's `cls` names
        self.used_as_tensor: set[int] = set()  # value expressions of bindings used as tensors (tensor_uses)
        self._ty_cache: dict[int, T.Ty | None] = {}

    def forget(self) -> None:
        """Drop memoised kinds: the walker's bindings changed."""
        self._ty_cache.clear()

    def annotation_ty(self, annotation: ast.expr) -> T.Ty | None:
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(annotation, ast.Subscript):  # Optional[Tensor]
            outer = self.resolve(annotation.value) or ""
            if outer.endswith("Optional"):
                return self.annotation_ty(annotation.slice)
            return None
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):  # Tensor | None
            return self._union_ty(annotation)
        name = self.resolve(annotation)
        if name in ("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"):
            return T.T_TENSOR
        if name in ("int", "float", "bool", "str"):
            return T.T_PY
        if name in ("torch.cuda.Stream",):
            return T.Ty(T.STREAM)
        if name in ("torch.cuda.Event",):
            return T.Ty(T.EVENT)
        if name and name in self.st.summary.classes:
            return T.Ty(T.INSTANCE, ref=name)
        return None

    def _union_ty(self, annotation: ast.BinOp) -> T.Ty | None:
        """`Tensor | None` is a tensor where it is a value at all; `Tensor | Cache | None` says
        only that it may be one (an `isinstance` test picks), so it gives no kind."""
        parts: list[ast.expr] = []
        stack: list[ast.expr] = [annotation]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
                stack.extend((node.right, node.left))
            elif not (isinstance(node, ast.Constant) and node.value is None):
                parts.append(node)
        kinds = {self.annotation_ty(part) for part in parts}
        return kinds.pop() if len(kinds) == 1 else None

    def ty(self, node: ast.AST | None) -> T.Ty | None:
        """The kind of value ``node`` evaluates to (memoised until the next statement)."""
        if node is None:
            return None
        key = id(node)
        cache = self._ty_cache
        if key in cache:
            return cache[key]
        result = self._ty(node)
        if result is None and key in self.used_as_tensor:
            result = T.T_TENSOR  # `x = value` where the function uses `x` as a tensor (tensor_uses)
        cache[key] = result
        return result

    def _ty(self, node: ast.AST) -> T.Ty | None:
        kind_of = _KIND_OF.get(type(node))
        return kind_of(self, node) if kind_of is not None else None

    def _name_ty(self, node: ast.Name) -> T.Ty | None:
        return _as_named(node, self.lookup(node.id))

    def _constant_ty(self, node: ast.AST) -> T.Ty | None:
        return T.T_PY

    def _sequence_ty(self, node: ast.List | ast.Tuple | ast.ListComp) -> T.Ty | None:
        element = self._element_class_of(node)
        return T.Ty(T.PY, element=element) if element else T.T_PY

    def _binop_ty(self, node: ast.BinOp) -> T.Ty | None:
        if isinstance(node.op, (ast.Add, ast.Mod)) and is_str_expr(node):
            return T.T_PY  # `fmt + "_" + fmt`, `"%d" % n`: a string
        left, right = self.ty(node.left), self.ty(node.right)
        kinds = {k.kind for k in (left, right) if k is not None}
        if kinds & T.TENSORISH:
            if isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)) and kinds <= T.MASKS | {T.PY}:
                return T.T_MASK if T.MASK in kinds else T.T_HOST_MASK
            if kinds & T.ON_DEVICE:
                return T.T_TENSOR
            return T.T_HOST_NAMED if T.HOST_NAMED in kinds else T.T_HOST
        if left is not None and right is not None and left.kind == T.PY and right.kind == T.PY:
            return T.T_PY
        return None

    def _unary_ty(self, node: ast.UnaryOp) -> T.Ty | None:
        inner = self.ty(node.operand)
        if isinstance(node.op, ast.Not):
            if inner is not None and inner.kind in T.ON_HOST:
                return T.T_HOST_MASK  # `not lens_cpu[i]`: decided on the host, no device read
            return T.T_MASK if inner is not None and inner.tensorish else (T.T_PY if inner else None)
        if isinstance(node.op, ast.Invert) and inner is not None and inner.kind == T.MASK:
            return T.T_MASK
        return inner if inner is not None and (inner.tensorish or inner.kind == T.PY) else None

    def _compare_ty(self, node: ast.Compare) -> T.Ty | None:
        if all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
            return T.T_PY
        operands = [node.left, *node.comparators]
        if any((self.ty(o) or T.T_PY).tensorish for o in operands):
            return T.host_result((self.ty(o) for o in operands), mask=True) or T.T_MASK
        if all(self.ty(o) is not None for o in operands):
            return T.T_PY
        return None

    def _boolop_ty(self, node: ast.BoolOp) -> T.Ty | None:
        values = [self.ty(v) for v in node.values]
        if any(v is not None and v.tensorish for v in values):
            return T.host_result(values, mask=True) or T.T_MASK
        return T.T_PY if all(v is not None for v in values) else None

    def _subscript_ty(self, node: ast.Subscript) -> T.Ty | None:
        base = self.ty(node.value)
        if base is None:
            return None
        if base.tensorish:
            return T.unmasked(base)
        if base.kind == T.PY:
            return T.T_PY
        if base.element:
            return T.Ty(T.INSTANCE, ref=base.element)
        if base.kind == T.GRAPHED:
            return T.Ty(T.GRAPHED, tree=base.tree)
        return None

    def _ifexp_ty(self, node: ast.IfExp) -> T.Ty | None:
        body, orelse = self.ty(node.body), self.ty(node.orelse)
        if body != orelse and body is not None and orelse is not None:
            if all(self._is_module_kind(ty) for ty in (body, orelse)):
                return T.Ty(T.MODULE)  # `(A() if native else B())`: a module either way
        return body if body == orelse else None

    def _is_module_kind(self, ty: T.Ty) -> bool:
        return ty.kind == T.MODULE or (ty.kind == T.INSTANCE and self._is_module_class(ty.ref))

    def _named_ty(self, node: ast.NamedExpr) -> T.Ty | None:
        return self.ty(node.value)

    def _attribute_ty(self, node: ast.Attribute) -> T.Ty | None:
        return _as_named(node, self._attribute_kind(node))

    def _attribute_kind(self, node: ast.Attribute) -> T.Ty | None:
        owner = self.class_named(node.value)
        found = self._class_attr(owner, node.attr) if owner is not None else None
        if found is not None:  # `cls.generator`, `Noise.generator`: the class's own attribute
            return found
        base = self.ty(node.value)
        if base is not None:
            if base.kind == T.INSTANCE and base.ref:
                found = self._class_attr(base.ref, node.attr)
                if found is not None:
                    return found
                if self._class_method(base.ref, node.attr):
                    return T.Ty(T.FUNCTION, ref=base.ref, method=node.attr)
                return None
            if base.tensorish:
                if node.attr in T.PY_ATTRS:
                    return T.T_PY
                if node.attr in T.TENSOR_ATTRS:
                    return T.unmasked(base)
                return None
            if base.kind == T.PY:
                return None
            return None
        if node.attr in T.PY_ATTRS and isinstance(node.value, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
            # x.shape / x.dtype / x.device on anything: a Python value, whatever x is.
            return T.T_PY if self.resolve(node) is None else None
        name = self.resolve(node)
        if name and name.startswith("torch.") and T.is_dtype_name(name.split(".")[-1]):
            return T.T_PY
        return None

    def class_named(self, node: ast.expr) -> str | None:
        """The project class ``node`` names: its name, or `cls` in one of its methods."""
        if not isinstance(node, ast.Name) or self.lookup(node.id) is not None:
            return None
        if node.id == "cls" and self.owner is not None:
            return self.owner
        name = self.resolve(node)
        return name if name is not None and name in self.st.class_attrs else None

    def _class_attr(self, class_qualname: str, attr: str) -> T.Ty | None:
        seen = set()
        queue = [class_qualname]
        while queue:
            current = queue.pop(0)
            if current in seen:
                continue
            seen.add(current)
            attrs = self.st.class_attrs.get(current)
            if attrs is None:
                continue
            if attr in attrs:
                return attrs[attr]
            queue.extend(self.st.summary.classes[current].bases)
        return None

    def _class_method(self, class_qualname: str, method: str) -> bool:
        summary = self.st.summary.classes.get(class_qualname)
        return summary is not None and method in summary.methods

    def _call_ty(self, node: ast.Call) -> T.Ty | None:
        func = node.func
        name = self.resolve(func)
        if name is not None:
            return self._named_call_ty(name, node)
        if isinstance(func, ast.Attribute):
            method = func.attr
            receiver = self.ty(func.value)
            if receiver is not None and receiver.tensorish:
                if method in _MODULE_ONLY_METHODS:
                    return T.Ty(T.MODULE)  # `(...).cuda().eval()`: only a module has eval()
                if method in T.PY_METHODS:
                    return T.T_PY
                if method == "cpu" or (method == "to" and T.call_targets_host(node)):
                    return T.T_HOST
                moved = method == "to" and receiver.kind in T.ON_HOST and T.call_targets_device(node)
                if method in ("cuda",) or moved:
                    return T.T_TENSOR
                if method in T.MASK_METHODS:
                    return T.T_HOST_MASK if receiver.kind in T.ON_HOST else T.T_MASK
                if method == "pin_memory":
                    return T.T_HOST
                return T.unmasked(receiver)
            if receiver is not None and receiver.kind in (T.MODULE, T.INSTANCE) and method in _MODULE_CHAINING:
                return receiver  # model.cuda(), model.eval(), model.to(device) return the module
            if receiver is not None and receiver.kind in (T.MODULE, T.GRAPHED):
                if method in ("forward", "__call__"):
                    return T.T_TENSOR
                return None
            if receiver is not None and receiver.kind == T.INSTANCE:
                if method == "forward":
                    return T.T_TENSOR
                return None
            if receiver is not None and receiver.kind == T.STREAM and method == "record_event":
                return T.Ty(T.EVENT)
            if receiver is None and _non_blocking_device_copy(node, method):
                return T.T_TENSOR  # `w_cpu.to("cuda", non_blocking=True)`, whatever w_cpu is
            if receiver is None and method in T.TENSOR_ONLY_METHODS:
                if T.named_as_host(func.value):
                    # `lens_cpu.max()`: a tensor (or array) the code calls host data
                    return T.T_HOST_MASK if method in T.MASK_METHODS else T.T_HOST_NAMED
                if method in T.MASK_METHODS:
                    return T.T_MASK
                return T.T_TENSOR
            if method == "compile" and receiver is not None and receiver.kind == T.INSTANCE:
                return None
            return None
        if isinstance(func, ast.Call) and not func.args and self.resolve(func.func) == "torch.compile":
            # `torch.compile(mode=...)(step)`: the call made the decorator, this one compiles
            return T_TREE if is_compile_capture(func) else T.Ty(T.MODULE)
        callee = self.ty(func)
        if callee is not None:
            if callee.kind in (T.MODULE, T.GRAPHED):
                return T.T_TENSOR
            if callee.kind == T.INSTANCE:
                return T.T_TENSOR if self._is_module_class(callee.ref) else None
        return None

    def _is_module_class(self, qualname: str | None) -> bool:
        """Calling an instance of a project class runs forward: a module call, a tensor."""
        seen = set()
        queue = [qualname] if qualname else []
        while queue:
            current = queue.pop()
            if current in seen:
                continue
            seen.add(current)
            if current.startswith("torch.nn.") or current.endswith(".Module"):
                return True
            summary = self.st.summary.classes.get(current)
            if summary is None:
                if current == qualname:
                    return True  # defined in another file: calling an instance is a module call
                continue
            if "forward" in summary.methods:
                return True
            queue.extend(summary.bases)
        return False

    def _named_call_ty(self, name: str, node: ast.Call) -> T.Ty | None:
        if T.is_host_factory(name):
            return T.host_factory_kind(name, node)
        if name in T.MASK_FUNCTIONS:
            return self._host_operands(node, mask=True) or T.T_MASK
        if name in ("torch.cuda.Stream", "torch.cuda.current_stream", "torch.cuda.default_stream"):
            return T.Ty(T.STREAM)
        if name == "torch.cuda.Event":
            return T.Ty(T.EVENT)
        if self.st.flow_hooks.is_device_module_factory(name):
            return T.Ty(T.DEVICE_MODULE)
        if name == "torch.cuda.CUDAGraph":
            return T.Ty(T.GRAPH)
        if name == "torch.Generator":
            device = T.keyword(node, "device") or (node.args[0] if node.args else None)
            return T.Ty(T.GENERATOR) if not T.device_is_host(device) else T.T_PY
        if name in T.OPTIMIZERS_WITH_CAPTURABLE or name in T.OPTIMIZERS_NEVER_CAPTURABLE:
            flag = T.keyword(node, "capturable")
            # capturable=some_flag is unknown, so not reported: only a missing or False flag is.
            capturable = flag is not None and not T.is_false(flag)
            fixable = None
            if name in T.OPTIMIZERS_WITH_CAPTURABLE:
                fixable = self.st.span(node)
                self.st.calls_by_span[fixable] = node
            return T.Ty(T.OPTIMIZER, capturable=capturable, fixable_at=fixable)
        if name.startswith("torch.optim.") and name.count(".") == 2 and name.split(".")[-1][:1].isupper():
            return T.Ty(T.OPTIMIZER, capturable=True)  # SGD & co: no host step state
        if name == "torch.amp.GradScaler":
            return T.Ty(T.SCALER)
        if name in GRAPHED_CALLABLES:
            return T.Ty(T.GRAPHED)  # calling it replays a graph and returns its static outputs
        if name == "torch.compile" and is_compile_capture(node):
            return T_TREE  # the same, in the CUDA graph tree every cudagraph-mode function shares
        if name == "torch.compile":
            return T.Ty(T.MODULE)  # compiled without CUDA graphs: a plain callable
        if name in ("torch.nn.ModuleList", "torch.nn.Sequential"):
            element = self._element_class(node)
            return T.Ty(T.MODULE, element=element)
        if name.startswith("torch.nn.") and name.split(".")[-1][:1].isupper():
            return T.Ty(T.MODULE)
        if name in self.st.summary.classes:
            return T.Ty(T.INSTANCE, ref=name)
        if _looks_like_project_class(name):
            return T.Ty(T.INSTANCE, ref=name)  # a class from another file: resolved project-wide
        if T.is_torch_tensor_function(name):
            device = T.keyword(node, "device")
            if T.is_true(T.keyword(node, "pin_memory")) or (device is not None and T.device_is_host(device) is True):
                return T.T_HOST  # torch.empty(..., pin_memory=True), torch.zeros(n, device="cpu")
            if device is None and name in T.CPU_DEFAULT_FACTORIES:
                return T.T_HOST  # torch.arange(n): made on the CPU unless a device says otherwise
            if device is None:
                return self._host_operands(node) or T.T_TENSOR  # torch.quantile(cpu_t): stays on the CPU
            return T.T_TENSOR
        if name in ("len", "int", "float", "bool", "str", "range", "isinstance", "round", "sum", "abs", "min", "max"):
            if name in ("min", "max", "abs", "sum") and any((self.ty(a) or T.T_PY).tensorish for a in node.args):
                return self._host_operands(node) or T.T_TENSOR
            return T.T_PY
        return None

    def _host_operands(self, node: ast.Call, mask: bool = False) -> T.Ty | None:
        """A torch op computes where its tensor operands live: on the host if they all do."""
        operands: list[ast.expr] = []
        for value in [*node.args, *(kw.value for kw in node.keywords)]:
            operands.extend(value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value])
        return T.host_result((self.ty(operand) for operand in operands), mask=mask)

    def _element_class_of(self, node: ast.List | ast.Tuple | ast.ListComp) -> str | None:
        """`[Block(d) for _ in range(n)]`, `[a, b]` of one project class -> that class."""
        elements = [node.elt] if isinstance(node, ast.ListComp) else list(node.elts)
        classes = set()
        for element in elements:
            if isinstance(element, ast.Call):
                name = self.resolve(element.func)
                if name is not None and (name in self.st.summary.classes or _looks_like_project_class(name)):
                    classes.add(name)
                    continue
            return None
        return classes.pop() if len(classes) == 1 else None

    def _element_class(self, node: ast.Call) -> str | None:
        """nn.ModuleList([Block() for _ in range(n)]) -> the class of its elements."""
        if not node.args:
            return None
        source = node.args[0]
        candidates: list[ast.expr] = []
        if isinstance(source, (ast.ListComp, ast.GeneratorExp)):
            candidates = [source.elt]
        elif isinstance(source, (ast.List, ast.Tuple)):
            candidates = list(source.elts)
        else:
            candidates = list(node.args)
        classes = set()
        for candidate in candidates:
            ty = self.ty(candidate)
            if ty is None or ty.kind != T.INSTANCE:
                return None
            classes.add(ty.ref)
        return classes.pop() if len(classes) == 1 else None


def _as_named(node: ast.Name | ast.Attribute, ty: T.Ty | None) -> T.Ty | None:
    """A tensor whose name says host data (`lens_cpu: Tensor`) is not reported as on the device."""
    if ty is not None and ty.kind in T.ON_DEVICE and T.named_as_host(node):
        return T.T_HOST_NAMED
    return ty


_EXTERNAL_ROOTS = frozenset(
    {"torch", "numpy", "typing", "collections", "dataclasses", "enum", "pathlib", "logging", "abc"}
)


def _non_blocking_device_copy(call: ast.Call, method: str) -> bool:
    """`x.cuda(non_blocking=True)`, `x.to(device, non_blocking=True)`: whatever `x` is, the
    result is a device tensor. `Module.to` takes `non_blocking` too, but a model moved that
    way is not the pattern: the keyword is how a prefetch or an offload reload is spelled."""
    if not T.is_true(T.keyword(call, "non_blocking")):
        return False
    return method == "cuda" or (method == "to" and T.call_targets_device(call))


def _looks_like_project_class(name: str) -> bool:
    """`pkg.layers.Block`: a CamelCase name from a module that is not a known library."""
    root, _, rest = name.partition(".")
    tail = name.rsplit(".", 1)[-1]
    return bool(rest) and root not in _EXTERNAL_ROOTS and tail[:1].isupper() and not tail.isupper()


# The kind of an expression, by its node type (a dict: faster than a chain of isinstance). Each
# method takes the node type it is filed under, which a dict's type cannot say key by key.
_KIND_OF: dict[type[ast.AST], Callable[[ValueKinds, Any], T.Ty | None]] = {
    ast.Name: ValueKinds._name_ty,
    ast.Constant: ValueKinds._constant_ty,
    ast.List: ValueKinds._sequence_ty,
    ast.Tuple: ValueKinds._sequence_ty,
    ast.ListComp: ValueKinds._sequence_ty,
    ast.Dict: ValueKinds._constant_ty,
    ast.Set: ValueKinds._constant_ty,
    ast.DictComp: ValueKinds._constant_ty,
    ast.SetComp: ValueKinds._constant_ty,
    ast.JoinedStr: ValueKinds._constant_ty,
    ast.Attribute: ValueKinds._attribute_ty,
    ast.Call: ValueKinds._call_ty,
    ast.BinOp: ValueKinds._binop_ty,
    ast.UnaryOp: ValueKinds._unary_ty,
    ast.Compare: ValueKinds._compare_ty,
    ast.BoolOp: ValueKinds._boolop_ty,
    ast.Subscript: ValueKinds._subscript_ty,
    ast.IfExp: ValueKinds._ifexp_ty,
    ast.NamedExpr: ValueKinds._named_ty,
}
