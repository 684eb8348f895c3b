"""The file phase: one pass over a module's syntax tree into a `ModuleSummary`.

It resolves names through imports, gives values a kind (tensor, stream, optimizer, ...),
finds the places that may be capture regions, records every call it can name for the
call graph, and runs the rule detectors to collect candidate hazards. It never looks at
another file: cross-file questions are left as symbolic references for the project phase.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator

from graphlint.checkers import capture_rules, replay_rules, stream_rules
from graphlint.checkers import types as T
from graphlint.checkers.kinds import GRAPHED_CALLABLES, ValueKinds, is_compile_capture
from graphlint.checkers.model import (
    COMPILE,
    GRAPH,
    CallRef,
    ClassSummary,
    EntryRef,
    FunctionSummary,
    Hazard,
    ModuleSummary,
    OpaqueCall,
    Region,
)
from graphlint.checkers.names import LIBRARY_ROOTS, ImportMap, canonical, dotted_parts, source_text
from graphlint.findings import Fix
from graphlint.fix_ops import SetKeyword

_BUILTINS = frozenset(dir(builtins))
_CAPTURE_CONTEXTS = frozenset({"torch.cuda.graph"})
_STREAM_CONTEXTS = frozenset({"torch.cuda.stream", "torch.cuda.StreamContext", "torch.cuda.streams.StreamContext"})
_AUTOCAST = frozenset({"torch.autocast", "torch.cuda.amp.autocast"})
_CAPTURING_GUARDS = frozenset(
    {
        "torch.cuda.is_current_stream_capturing",
        "torch.compiler.is_compiling",
        "torch._dynamo.is_compiling",
        "torch.compiler.is_dynamo_compiling",
    }
)
_ORDERING_METHODS = frozenset({"wait_stream", "wait_event", "wait", "record", "record_event", "synchronize"})
_FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef)


class ModuleState:
    """What every function walker of one file shares: imports, definitions, class knowledge."""

    def __init__(self, tree: ast.Module, module: str, is_package: bool, lines: list[str]) -> None:
        self.tree = tree
        self.module = module
        self.lines = lines
        self.imports = ImportMap(module, is_package)
        self.summary = ModuleSummary(module=module)
        self.defs: dict[str, str] = {}  # module-level function/class name -> qualname
        self.module_env: dict[str, T.Ty] = {}
        self.module_assigned: set[str] = set()
        self.class_attrs: dict[str, dict[str, T.Ty]] = {}
        self.class_nodes: dict[str, ast.ClassDef] = {}
        self.registered_generators: set[str] = set()
        self.graphed_modules: set[str] = set()
        self.captures: list[replay_rules.Capture] = []
        self.walkers: list[FunctionWalker] = []
        self.calls_by_span: dict[tuple[int, int, int, int], ast.Call] = {}  # optimizer constructors

    # -- positions ---------------------------------------------------------------------
    def column(self, line: int, byte_offset: int) -> int:
        """ast columns count UTF-8 bytes; findings count characters, 1-based."""
        if 1 <= line <= len(self.lines):
            text = self.lines[line - 1]
            if not text.isascii():
                return len(text.encode("utf-8")[:byte_offset].decode("utf-8", "replace")) + 1
        return byte_offset + 1

    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        line = node.lineno
        end_line = node.end_lineno or line
        return (
            line,
            self.column(line, node.col_offset),
            end_line,
            self.column(end_line, node.end_col_offset if node.end_col_offset is not None else node.col_offset),
        )

    # -- names -------------------------------------------------------------------------
    def resolve_parts(self, parts: list[str]) -> str | None:
        root = parts[0]
        if root in self.defs:
            base = self.defs[root]
        elif root in self.imports.names:
            base = self.imports.names[root]
        elif root in _BUILTINS and root not in self.module_assigned:
            base = root
        else:
            return None
        return canonical(".".join([base, *parts[1:]]))


class FileSummarizer:
    """Builds the `ModuleSummary` of one parsed file."""

    def __init__(self, tree: ast.Module, module: str, is_package: bool, source: str) -> None:
        self.source = source
        self.state = ModuleState(tree, module, is_package, source.splitlines())

    def run(self) -> ModuleSummary:
        st = self.state
        self._collect_imports_and_defs()
        self._prescan_module_env()
        self._prescan_classes()
        self._prescan_file_facts()
        module_fn = FunctionWalker(st, f"{st.module}.<module>", "<module>", None, st.tree, outer=None)
        module_fn.walk_body(st.tree.body)
        replay_rules.analyze(st, self.source)
        stream_rules.analyze(st, self.source)
        return st.summary

    def _collect_imports_and_defs(self) -> None:
        st = self.state
        self._graphed_calls: list[ast.Call] = []
        for node in _all_statements(st.tree.body):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                st.imports.add(node)
        # Whole-tree scans only for files that mention what they look for.
        if "register_generator_state" in self.source or "make_graphed_callables" in self.source:
            for node in ast.walk(st.tree):
                if isinstance(node, ast.Call):
                    func = node.func
                    tail = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                    if tail == "register_generator_state" and node.args:
                        st.registered_generators.add(source_text(node.args[0]))
                    elif tail == "make_graphed_callables":
                        self._graphed_calls.append(node)
        for node in _module_level_statements(st.tree.body):
            if isinstance(node, (*_FUNCTION_NODES, ast.ClassDef)):
                st.defs[node.name] = f"{st.module}.{node.name}"
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in _bound_names(target):
                        st.module_assigned.add(name)
        # Module-level aliases (`X = other.thing`, re-exported imports) for the project phase.
        for local, dotted in st.imports.names.items():
            st.summary.aliases[local] = dotted

    def _prescan_module_env(self) -> None:
        """Module-level values that functions read as globals (model, opt, g, static_x, ...)."""
        st = self.state
        walker = FunctionWalker(st, f"{st.module}.<module>", "<module>", None, st.tree, outer=None, record=False)
        for node in _module_level_statements(st.tree.body):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                ty = walker.ty(node.value)
                if ty is not None:
                    st.module_env[node.targets[0].id] = ty
                parts = dotted_parts(node.value)
                if parts is not None:
                    resolved = st.resolve_parts(parts)
                    if resolved:
                        st.summary.aliases[node.targets[0].id] = resolved

    def _prescan_classes(self) -> None:
        st = self.state
        for node, qualname in _classes(st.tree.body, st.module):
            st.class_nodes[qualname] = node
            methods = {}
            for item in node.body:
                if isinstance(item, _FUNCTION_NODES):
                    methods[item.name] = f"{qualname}.{item.name}"
            bases = []
            for base in node.bases:
                parts = dotted_parts(base)
                resolved = st.resolve_parts(parts) if parts else None
                if resolved:
                    bases.append(resolved)
            st.class_attrs[qualname] = {}
            st.summary.classes[qualname] = ClassSummary(qualname, bases, methods, {})
        # Attribute kinds from `self.x = ...` in every method, __init__ first.
        for qualname, node in st.class_nodes.items():
            attrs = st.class_attrs[qualname]
            methods = sorted(
                (item for item in node.body if isinstance(item, _FUNCTION_NODES)),
                key=lambda item: item.name != "__init__",
            )
            for method in methods:
                walker = FunctionWalker(
                    st, f"{qualname}.{method.name}", method.name, qualname, method, outer=None, record=False
                )
                for stmt in _statements(method.body):
                    if isinstance(stmt, ast.Assign):
                        ty = None
                        for target in stmt.targets:
                            if _is_self_attr(target) and target.attr not in attrs:
                                ty = ty or walker.ty(stmt.value)
                                if ty is not None:
                                    attrs[target.attr] = ty
                    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None and _is_self_attr(stmt.target):
                        ty = walker.ty(stmt.value) or walker.annotation_ty(stmt.annotation)
                        if ty is not None:
                            attrs.setdefault(stmt.target.attr, ty)
            summary = st.summary.classes[qualname]
            for attr, ty in attrs.items():
                if ty.kind == T.INSTANCE and ty.ref:
                    summary.attr_classes[attr] = ty.ref

    def _prescan_file_facts(self) -> None:
        """Modules passed to make_graphed_callables anywhere in the file (for GL113)."""
        st = self.state
        for node in self._graphed_calls:
            parts = dotted_parts(node.func)
            if (st.resolve_parts(parts) if parts else None) not in GRAPHED_CALLABLES:
                continue
            first = node.args[0] if node.args else T.keyword(node, "callables") or T.keyword(node, "modules")
            if first is not None:
                elements = first.elts if isinstance(first, (ast.Tuple, ast.List)) else [first]
                for element in elements:
                    st.graphed_modules.add(source_text(element))


class FunctionWalker(ValueKinds):
    """Walks one function (or the module body) in statement order."""

    def __init__(
        self,
        state: ModuleState,
        qualname: str,
        display: str,
        class_qualname: str | None,
        node: ast.AST,
        outer: FunctionWalker | None,
        record: bool = True,
    ) -> None:
        self.st = state
        self.qualname = qualname
        self.display = display
        self.class_qualname = class_qualname
        self.node = node
        self.outer = outer
        self.record = record
        self.env: dict[str, T.Ty] = {}
        self.local_defs: dict[str, str] = {}
        self.locals: set[str] = set()
        self.globals: set[str] = set()
        self.regions: tuple[int, ...] = ()
        self.guarded = False
        self.graphed_calls = 0
        self._ordering: list[tuple[int, str, str, list[str]]] | None = None
        self._ty_cache: dict[int, T.Ty | None] = {}
        self.capture_contexts: dict[str, ast.Call] = {}  # ctx = torch.cuda.graph(g)
        self.is_module = isinstance(node, ast.Module)
        self.summary = FunctionSummary(qualname, display, getattr(node, "lineno", 1))
        if record:
            functions = state.summary.functions
            if qualname in functions:  # a redefinition (if/else branches): keep both bodies checked
                earlier = functions.pop(qualname)
                functions[f"{qualname}@{earlier.line}"] = earlier
            functions[qualname] = self.summary
            state.walkers.append(self)
        if isinstance(node, _FUNCTION_NODES):
            self._bind_parameters(node)
            self.locals |= _assigned_names(node)

    # -- setup -------------------------------------------------------------------------
    def _bind_parameters(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        args = node.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                self.locals.add(extra.arg)
        for index, arg in enumerate(params):
            self.locals.add(arg.arg)
            if index == 0 and self.class_qualname and arg.arg in ("self", "cls") and not _is_staticmethod(node):
                if arg.arg == "self":
                    self.env["self"] = T.Ty(T.INSTANCE, ref=self.class_qualname)
                continue
            self.summary.params.append(arg.arg)
            if arg.annotation is not None:
                ty = self.annotation_ty(arg.annotation)
                if ty is not None:
                    self.env[arg.arg] = ty

    @property
    def ordering(self) -> list[tuple[int, str, str, list[str]]]:
        """Stream ordering calls of this function, for GL109 (fork before, join after)."""
        if self._ordering is None:
            self._ordering = []
            self._collect_ordering()
        return self._ordering

    def _collect_ordering(self) -> None:
        assert self._ordering is not None
        body = self.node.body if hasattr(self.node, "body") else []
        for stmt in body:
            for node in _walk_no_defs(stmt):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    if node.func.attr in _ORDERING_METHODS:
                        receiver = source_text(node.func.value)
                        args = [source_text(a) for a in node.args]
                        self._ordering.append((node.lineno, receiver, node.func.attr, args))

    # -- queries used by the rule detectors ----------------------------------------------
    def lookup(self, name: str) -> T.Ty | None:
        walker: FunctionWalker | None = self
        while walker is not None:
            if name in walker.env:
                return walker.env[name]
            if name in walker.locals and walker is self:
                return None
            walker = walker.outer
        return self.st.module_env.get(name)

    def is_local_name(self, name: str) -> bool:
        walker: FunctionWalker | None = self
        while walker is not None:
            if name in walker.locals or name in walker.env or name in walker.local_defs:
                return True
            walker = walker.outer
        return False

    def resolve(self, node: ast.AST) -> str | None:
        """Canonical dotted name of an expression that names an import or a definition."""
        parts = dotted_parts(node)
        if parts is None:
            return None
        root = parts[0]
        walker: FunctionWalker | None = self
        while walker is not None:
            if root in walker.local_defs:
                return ".".join([walker.local_defs[root], *parts[1:]])
            walker = walker.outer
        if self.is_local_name(root) and root not in self.globals:
            return None
        if self.is_module and root in self.st.module_env:
            return None
        return self.st.resolve_parts(parts)

    def is_global_name(self, name: str) -> bool:
        return name in self.globals or (self.is_module and name in self.st.module_assigned)

    def generator_registered(self, node: ast.expr) -> bool:
        return source_text(node) in self.st.registered_generators

    def is_graphed_module(self, node: ast.expr) -> bool:
        return source_text(node) in self.st.graphed_modules

    def ordering_before(self, line: int, stream: str) -> bool:
        start = self._region_start()
        for at, receiver, method, args in self.ordering:
            if start <= at < line:
                if receiver == stream and method in ("wait_stream", "wait_event"):
                    return True
                if method == "wait" and stream in args:
                    return True
        return False

    def joined_after(self, line: int, stream: str) -> bool:
        for at, receiver, method, args in self.ordering:
            if at > line:
                if method == "wait_stream" and stream in args and receiver != stream:
                    return True
                if method in ("wait_event", "wait") and receiver != stream:
                    return True
                if method == "synchronize" and receiver in (stream, "torch.cuda"):
                    return True
        return False

    def _region_start(self) -> int:
        if self.regions:
            return self.st.summary.regions[self.regions[-1]].line
        return getattr(self.node, "lineno", 0)

    def capturable_fix(self, ty: T.Ty) -> Fix | None:
        call = self.st.calls_by_span.get(ty.fixable_at) if ty.fixable_at else None
        if call is None:
            return None
        return _keyword_fix(self.st, call, "capturable", "True", "construct the optimizer with `capturable=True`")

    # -- hazards and calls ---------------------------------------------------------------
    def hazard(
        self,
        code: str,
        node: ast.AST,
        message: str,
        fix: Fix | None = None,
        always: bool = False,
        needs_region: int | None = None,
    ) -> None:
        if not self.record or (self.guarded and not always):
            return
        line, col, end_line, end_col = self.st.span(node)
        self.summary.hazards.append(
            Hazard(code, message, line, col, end_line, end_col, self.regions, fix, always, needs_region)
        )

    def _call(self, target: str, node: ast.Call) -> None:
        if self.record and not self.guarded:
            line, col, _, _ = self.st.span(node)
            self.summary.calls.append(CallRef(target, line, col, self.regions, self._typed_args(node)))

    def _typed_args(self, call: ast.Call) -> tuple[tuple[str, str], ...]:
        """Arguments whose class is known, so a callee's parameter calls can be resolved."""
        typed = []
        keyed = [(str(i), a) for i, a in enumerate(call.args) if not isinstance(a, ast.Starred)]
        keyed += [(kw.arg, kw.value) for kw in call.keywords if kw.arg]
        for key, value in keyed:
            ty = self.ty(value)
            if ty is not None and ty.kind == T.INSTANCE and ty.ref:
                typed.append((key, f"c:{ty.ref}"))
            elif ty is None and isinstance(value, ast.Name) and value.id in self.summary.params:
                typed.append((key, f"p:{value.id}"))
        return tuple(typed)

    def _new_region(self, node: ast.AST, label: str, target: str | None, kind: str = GRAPH) -> int:
        self.st.summary.regions.append(Region(node.lineno, label, target, kind))
        return len(self.st.summary.regions) - 1

    # -- statements ----------------------------------------------------------------------
    def walk_body(self, body: list[ast.stmt]) -> None:
        """Walk a block, tracking capture_begin()/capture_end() spans and early-exit guards."""
        open_capture: tuple[str, tuple[int, ...]] | None = None
        captured: list[ast.stmt] = []
        saved_guard = self.guarded
        for stmt in body:
            begin = _capture_call(stmt, "capture_begin")
            if begin is not None and open_capture is None:
                region = self._new_region(stmt, f"{begin}.capture_begin()", None)
                open_capture = (begin, self.regions)
                captured = []
                self.walk_stmt(stmt)
                self.regions = (*self.regions, region)
                continue
            end = _capture_call(stmt, "capture_end")
            if end is not None and open_capture is not None and end == open_capture[0]:
                self._close_capture(stmt, captured)
                self.regions = open_capture[1]
                open_capture = None
            if open_capture is not None:
                captured.append(stmt)
            self.walk_stmt(stmt)
            if open_capture is not None and _ends_capture_inside(stmt, open_capture[0]):
                self._close_capture(stmt, captured)
                self.regions = open_capture[1]  # try: ... finally: g.capture_end()
                open_capture = None
            if isinstance(stmt, ast.If) and _capturing_guard(self, stmt.test) is True and _exits(stmt.body):
                self.guarded = True  # `if capturing: return ...`: the rest never runs in capture
        if open_capture is not None:
            self.regions = open_capture[1]
        self.guarded = saved_guard

    def _close_capture(self, end: ast.stmt, captured: list[ast.stmt]) -> None:
        """Record a capture_begin()/capture_end() span for the replay rules."""
        call = end.value if isinstance(end, ast.Expr) else None
        graph = call.func.value if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) else None
        if graph is None:
            for inner in _statements([end]):
                if _capture_call(inner, "capture_end") is not None:
                    graph = inner.value.func.value
                    break
        if self.record and graph is not None and captured:
            first, last = captured[0], end
            replay_rules.note_capture(self, captured, graph, first.lineno, last.end_lineno or last.lineno)

    def walk_stmt(self, stmt: ast.stmt) -> None:
        self._ty_cache.clear()  # bindings change between statements
        if isinstance(stmt, _FUNCTION_NODES):
            self._nested_function(stmt)
        elif isinstance(stmt, ast.ClassDef):
            if self.is_module:
                self._class_body(stmt, f"{self.st.module}.{stmt.name}")
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            self._with(stmt)
        elif isinstance(stmt, ast.If):
            self._if(stmt)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.expr(stmt.iter)
            iter_ty = self.ty(stmt.iter)
            self._bind(stmt.target, _element_ty(iter_ty))
            self.walk_body(stmt.body)
            self.walk_body(stmt.orelse)
        elif isinstance(stmt, ast.While):
            self.expr(stmt.test)
            capture_rules.check_test(self, stmt.test, "while")
            self.walk_body(stmt.body)
            self.walk_body(stmt.orelse)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self.walk_body(stmt.body)
            for handler in stmt.handlers:
                self.walk_body(handler.body)
            self.walk_body(stmt.orelse)
            self.walk_body(stmt.finalbody)
        elif isinstance(stmt, ast.Assign):
            self.expr(stmt.value)
            capture_rules.check_self_update(self, stmt)
            if (
                isinstance(stmt.value, ast.Call)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and self.resolve(stmt.value.func) in _CAPTURE_CONTEXTS
            ):
                self.capture_contexts[stmt.targets[0].id] = stmt.value
            value_ty = self.ty(stmt.value)
            for target in stmt.targets:
                self.expr_target(target)
                self._bind(target, value_ty)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.expr(stmt.value)
                self._bind(stmt.target, self.ty(stmt.value) or self.annotation_ty(stmt.annotation))
        elif isinstance(stmt, ast.AugAssign):
            self.expr(stmt.value)
            self.expr_target(stmt.target)
            capture_rules.check_augassign(self, stmt)
        elif isinstance(stmt, ast.Assert):
            self.expr(stmt.test)
            capture_rules.check_test(self, stmt.test, "assert")
            if stmt.msg is not None:
                self.expr(stmt.msg)
        elif isinstance(stmt, (ast.Global, ast.Nonlocal)):
            self.globals.update(stmt.names)
        elif isinstance(stmt, ast.Return):
            if stmt.value is not None:
                self.expr(stmt.value)
                self._note_wrapper_return(stmt.value)
        elif isinstance(stmt, ast.Match):
            self.expr(stmt.subject)
            for case in stmt.cases:
                self.walk_body(case.body)
        else:
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.expr):
                    self.expr(child)

    def _bind(self, target: ast.expr, ty: T.Ty | None) -> None:
        if isinstance(target, ast.Name):
            if ty is None:
                self.env.pop(target.id, None)
                if self.is_module:
                    self.st.module_env.pop(target.id, None)
            else:
                self.env[target.id] = ty
        elif isinstance(target, (ast.Tuple, ast.List)):
            element = ty if ty is not None and ty.tensorish else None
            for elt in target.elts:
                self._bind(elt.value if isinstance(elt, ast.Starred) else elt, element)

    def _if(self, stmt: ast.If) -> None:
        self.expr(stmt.test)
        guard = _capturing_guard(self, stmt.test)
        if guard is None:
            capture_rules.check_test(self, stmt.test, "if")
            self.walk_body(stmt.body)
            self.walk_body(stmt.orelse)
            return
        saved = self.guarded
        # guard True: the test is true while capturing; its else-branch never runs in capture.
        self.guarded = saved or not guard
        self.walk_body(stmt.body)
        self.guarded = saved or guard
        self.walk_body(stmt.orelse)
        self.guarded = saved

    def _nested_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if self.is_module:
            qualname = f"{self.st.module}.{node.name}"
            display = node.name
            outer = None
        else:
            qualname = f"{self.qualname}.<locals>.{node.name}"
            display = f"{self.display}.<locals>.{node.name}"
            self.local_defs[node.name] = qualname
            outer = self
        self._decorators(node, qualname)
        walker = FunctionWalker(self.st, qualname, display, None, node, outer=outer, record=self.record)
        walker.walk_body(node.body)

    def _class_body(self, node: ast.ClassDef, qualname: str) -> None:
        for item in node.body:
            if isinstance(item, _FUNCTION_NODES):
                method_qualname = f"{qualname}.{item.name}"
                self._decorators(item, method_qualname)
                walker = FunctionWalker(
                    self.st, method_qualname, f"{node.name}.{item.name}", qualname, item, outer=None, record=self.record
                )
                walker.walk_body(item.body)
            elif isinstance(item, ast.ClassDef):
                self._class_body(item, f"{qualname}.{item.name}")

    def _decorators(self, node: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str) -> None:
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and self.resolve(decorator.func) == "torch.compile":
                if is_compile_capture(decorator):
                    self.st.summary.entries.append(EntryRef(f"f:{qualname}", node.lineno, COMPILE, self.display, False))

    def _with(self, stmt: ast.With | ast.AsyncWith) -> None:
        saved_regions = self.regions
        pushed: list[int] = []
        autocasts: list[tuple[ast.Call, Fix | None]] = []
        streams: list[ast.expr] = []
        for item in stmt.items:
            context = item.context_expr
            self.expr(context)
            if item.optional_vars is not None:
                self._bind(item.optional_vars, None)
            if isinstance(context, ast.Name) and context.id in self.capture_contexts:
                context = self.capture_contexts[context.id]  # ctx = torch.cuda.graph(g) ... with ctx:
            if not isinstance(context, ast.Call):
                continue
            name = self.resolve(context.func)
            if name in _CAPTURE_CONTEXTS:
                label = f"torch.cuda.graph({source_text(context.args[0]) if context.args else ''})"
                region = self._new_region(stmt, label, None)
                pushed.append(region)
                self._check_warmup(stmt, context)
                if self.record:
                    graph = context.args[0] if context.args else T.keyword(context, "cuda_graph")
                    replay_rules.note_capture(self, stmt.body, graph, stmt.lineno, stmt.end_lineno or stmt.lineno)
            elif isinstance(context.func, ast.Attribute) and context.func.attr == "capture_to_graph":
                pushed.append(self._new_region(stmt, "capture_to_graph(...)", None))
            elif name in _STREAM_CONTEXTS or _is_accelerator_stream(context):
                stream = context.args[0] if context.args else T.keyword(context, "stream")
                if stream is not None:
                    streams.append(stream)
            elif name in _AUTOCAST:
                if not _autocast_is_cpu(context) and not T.is_false(T.keyword(context, "cache_enabled")):
                    autocasts.append(
                        (
                            context,
                            _keyword_fix(
                                self.st, context, "cache_enabled", "False", "pass `cache_enabled=False` to autocast"
                            ),
                        )
                    )
            else:
                target = self._call_target(context)
                if target is not None:
                    pushed.append(self._new_region(stmt, f"{source_text(context.func)}(...)", target))
        for stream in streams:
            capture_rules.check_stream_context(self, stmt, stream)
        for context, fix in autocasts:
            self.hazard("GL107", context, "autocast without `cache_enabled=False` inside a capture", fix=fix)
        self.regions = (*saved_regions, *pushed)
        regions_before = len(self.st.summary.regions)
        graphed_before = self.graphed_calls
        self.walk_body(stmt.body)
        self.regions = saved_regions
        for context, fix in autocasts:
            inner = [r for r in range(regions_before, len(self.st.summary.regions))]
            if self.graphed_calls > graphed_before:
                self.hazard(
                    "GL107",
                    context,
                    "autocast without `cache_enabled=False` around a call of a make_graphed_callables "
                    "result: the graph reads casts that autocast's cache owns and frees on exit",
                    fix=fix,
                    always=True,
                )
            elif inner:
                self.hazard(
                    "GL107",
                    context,
                    "autocast without `cache_enabled=False` around a capture: the graph reads casts "
                    "that autocast's cache owns and frees on exit",
                    fix=fix,
                    always=True,
                    needs_region=inner[0],
                )

    def _check_warmup(self, stmt: ast.With | ast.AsyncWith, context: ast.Call) -> None:
        """GL108: was the captured work run before on a side stream, in this scope or class?"""
        captured = _callee_texts(stmt.body, self)
        if not captured:
            return  # only torch operators: nothing user-defined that needs a first run
        warm: set[str] = set()
        found_side_stream = False
        for scope in self._warmup_scopes():
            for node in _walk_no_defs(scope):
                if (isinstance(node, (ast.With, ast.AsyncWith)) and node.lineno < stmt.lineno) or (
                    isinstance(node, (ast.With, ast.AsyncWith)) and scope is not self.node
                ):
                    for item in node.items:
                        ctx = item.context_expr
                        if isinstance(ctx, ast.Call) and (
                            self.resolve(ctx.func) in _STREAM_CONTEXTS or _is_accelerator_stream(ctx)
                        ):
                            found_side_stream = True
                            warm |= _callee_texts(node.body, self)
        if found_side_stream and (captured & warm or _tails(captured) & _tails(warm)):
            return
        if self._calls_stream_helper_before(stmt.lineno):
            return
        shown = ", ".join(f"`{c}`" for c in sorted(captured)[:3])
        body = getattr(self.node, "body", [])
        eager = _callee_texts([s for s in body if s.end_lineno and s.end_lineno < stmt.lineno], self)
        if captured & eager:
            message = f"capture of {shown}, warmed up only on the capturing (current) stream, not a side stream"
        elif found_side_stream:
            message = f"capture of {shown}, which the side-stream warm-up before it never ran"
        else:
            message = f"capture of {shown} with no warm-up on a side stream before it"
        self.hazard(
            "GL108",
            context,
            message + ": lazy initialisation (cuBLAS, autotuning, allocator growth) would happen during capture",
            always=True,
        )

    def _warmup_scopes(self) -> Iterator[ast.AST]:
        yield self.node
        if self.class_qualname and self.class_qualname in self.st.class_nodes:
            for item in self.st.class_nodes[self.class_qualname].body:
                if isinstance(item, _FUNCTION_NODES) and item is not self.node:
                    yield item

    def _calls_stream_helper_before(self, line: int) -> bool:
        """A call before the capture to a function of this file that warms up on a side stream."""
        body = getattr(self.node, "body", [])
        for stmt in body:
            for node in _walk_no_defs(stmt):
                if isinstance(node, ast.Call) and node.lineno < line:
                    name = self.resolve(node.func)
                    if name and name in self.st.defs.values():
                        target = next(
                            (
                                n
                                for n in self.st.tree.body
                                if isinstance(n, _FUNCTION_NODES) and f"{self.st.module}.{n.name}" == name
                            ),
                            None,
                        )
                        if target is not None and _has_stream_block(self, target):
                            return True
        return False

    def _note_wrapper_return(self, value: ast.expr) -> None:
        """`def capture_to_graph(g): return torch.cuda.graph(g)` is itself a capture entry point."""
        if not isinstance(value, ast.Call):
            return
        name = self.resolve(value.func)
        if name in _CAPTURE_CONTEXTS or (
            isinstance(value.func, ast.Attribute) and value.func.attr == "capture_to_graph"
        ):
            self.summary.returns_capture = True
            return
        target = self._call_target(value)
        if target is not None and self.record:
            self.summary.returns.append(target)

    # -- expressions ---------------------------------------------------------------------
    def expr_target(self, target: ast.expr) -> None:
        """Visit the loads inside an assignment target (``x[idx] = ...``, ``self.a.b = ...``)."""
        if isinstance(target, ast.Subscript):
            self.expr(target.value)
            self.expr(target.slice)
        elif isinstance(target, ast.Attribute):
            self.expr(target.value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.expr_target(elt)
        elif isinstance(target, ast.Starred):
            self.expr_target(target.value)

    def expr(self, node: ast.expr) -> None:
        """Run the expression detectors on ``node`` and everything inside it (not lambdas)."""
        stack: list[ast.AST] = [node]
        pop, push = stack.pop, stack.append
        while stack:
            current = pop()
            kind = type(current)
            if kind is ast.Call:
                self._visit_call(current)
            elif kind is ast.Subscript:
                capture_rules.check_subscript(self, current)
            elif kind is ast.IfExp:
                capture_rules.check_test(self, current.test, "conditional expression")
            elif kind is ast.JoinedStr:
                capture_rules.check_fstring(self, current)
            elif kind is ast.Lambda:
                continue
            elif (kind is ast.Yield or kind is ast.YieldFrom) and self.regions:
                # @contextmanager yielding inside a capture: the caller's with-body is captured.
                if any(self.st.summary.regions[r].target is None for r in self.regions):
                    self.summary.returns_capture = True
            for name in _child_fields(kind):
                value = getattr(current, name)
                if type(value) is list:
                    for item in value:
                        if item is not None:
                            push(item)
                elif value is not None:
                    push(value)

    def _visit_call(self, call: ast.Call) -> None:
        name = self.resolve(call.func)
        capture_rules.check_call(self, call, name)
        if name in GRAPHED_CALLABLES:
            self._graphed_entry(call, name)
        elif name == "torch.compile" and call.args and is_compile_capture(call):
            self._entry_targets(call.args[0], call, COMPILE)
        elif (
            isinstance(call.func, ast.Call)
            and call.args
            and self.resolve(call.func.func) == "torch.compile"
            and not call.func.args
            and is_compile_capture(call.func)
        ):
            self._entry_targets(call.args[0], call, COMPILE)  # torch.compile(mode="reduce-overhead")(step)
        elif isinstance(call.func, ast.Attribute) and call.func.attr == "compile" and is_compile_capture(call):
            receiver = self.ty(call.func.value)
            if receiver is not None and receiver.kind == T.INSTANCE:
                self._entry_targets(call.func.value, call, COMPILE)
        callee = self.ty(call.func)
        if callee is not None and callee.kind == T.GRAPHED:
            self.graphed_calls += 1
        target = self._call_target(call)
        if target is not None:
            self._call(target, call)
        elif self.regions and self.record and not self.guarded:
            self._opaque(call.func, call, "call")

    def _call_target(self, call: ast.Call) -> str | None:
        func = call.func
        if isinstance(func, ast.Name):
            for walker in self._chain():
                if func.id in walker.local_defs:
                    return f"f:{walker.local_defs[func.id]}"
            ty = self.lookup(func.id)
            if ty is not None:
                if ty.kind == T.INSTANCE and ty.ref:
                    return f"i:{ty.ref}"
                if ty.kind == T.FUNCTION and ty.ref:
                    return _function_ref(ty.ref)
                return None
            if func.id in self.summary.params:
                return f"p:{func.id}"
            name = self.resolve(func)
            if name is None or "." not in name:
                return None
            return f"f:{name}"
        if isinstance(func, ast.Attribute):
            value = func.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
                if self.class_qualname:
                    return f"s:{self.class_qualname}:{func.attr}"
                return None
            receiver = self.ty(value)
            if receiver is not None:
                if receiver.kind == T.INSTANCE and receiver.ref:
                    return f"m:{receiver.ref}:{func.attr}"
                return None
            if isinstance(value, ast.Name) and value.id in self.summary.params:
                return f"pm:{value.id}:{func.attr}"
            name = self.resolve(func)
            if name is not None and not name.startswith(("torch.", "numpy.", "math.", "os.", "sys.")):
                return f"f:{name}"
        if isinstance(func, ast.Subscript):
            container = self.ty(func.value)
            if container is not None and container.element:
                return f"i:{container.element}"
        return None

    def _chain(self) -> Iterator[FunctionWalker]:
        walker: FunctionWalker | None = self
        while walker is not None:
            yield walker
            walker = walker.outer

    def _graphed_entry(self, call: ast.Call, name: str) -> None:
        first = call.args[0] if call.args else T.keyword(call, "callables") or T.keyword(call, "modules")
        if first is not None:
            self._entry_targets(first, call, "graphed")

    def _entry_targets(self, node: ast.expr, call: ast.Call, kind: str) -> None:
        elements = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
        if isinstance(node, ast.Call) and self.resolve(node.func) in ("tuple", "list") and node.args:
            container = self.ty(node.args[0])
            if container is not None and container.element:
                self._add_entry(f"i:{container.element}", call, kind)
            return
        for element in elements:
            target = self._callable_ref(element)
            if target is not None:
                self._add_entry(target, call, kind)
            elif self.record:
                self._opaque(element, call, COMPILE if kind == COMPILE else GRAPH)

    def _opaque(self, callee: ast.expr, call: ast.Call, kind: str) -> None:
        """Remember a callable graphlint cannot name, for `graphlint captures` (not library calls)."""
        name = self.resolve(callee)
        if name is not None and (name.partition(".")[0] in LIBRARY_ROOTS or "." not in name):
            return
        text = ast.unparse(callee)
        parameter = isinstance(callee, ast.Name) and callee.id in self.summary.params
        self.st.summary.opaque.append(OpaqueCall(text[:80], call.lineno, self.regions, kind, self.display, parameter))

    def _add_entry(self, target: str, call: ast.Call, kind: str) -> None:
        region_kind = COMPILE if kind == COMPILE else GRAPH
        if self.record:
            self.st.summary.entries.append(EntryRef(target, call.lineno, region_kind, self.display, True))

    def _callable_ref(self, node: ast.expr) -> str | None:
        """What calling ``node`` runs: a function, an instance's forward, a bound method."""
        ty = self.ty(node)
        if ty is not None:
            if ty.kind == T.INSTANCE and ty.ref:
                return f"i:{ty.ref}"
            if ty.kind == T.FUNCTION and ty.ref:
                return _function_ref(ty.ref)
            if ty.element:
                return f"i:{ty.element}"
            return None
        if isinstance(node, ast.Attribute):
            receiver = self.ty(node.value)
            if receiver is not None and receiver.kind == T.INSTANCE and receiver.ref:
                return f"m:{receiver.ref}:{node.attr}"
        if isinstance(node, ast.Name):
            for walker in self._chain():
                if node.id in walker.local_defs:
                    return f"f:{walker.local_defs[node.id]}"
        name = self.resolve(node)
        return f"f:{name}" if name else None


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_SCALAR_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "kind", "conversion", "type_comment", "is_async"})


def _child_fields(kind: type) -> tuple[str, ...]:
    """The fields of an expression node type that hold child expressions (cached per type)."""
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        if kind is ast.Constant or kind is ast.Name:
            fields = ()
        else:
            fields = tuple(f for f in kind._fields if f not in _SCALAR_FIELDS)
        _CHILD_FIELDS[kind] = fields
    return fields


def _function_ref(ref: str) -> str:
    if ":" in ref:
        owner, method = ref.split(":", 1)
        return f"m:{owner}:{method}"
    return f"f:{ref}"


def _element_ty(container: T.Ty | None) -> T.Ty | None:
    if container is None:
        return None
    if container.element:
        return T.Ty(T.INSTANCE, ref=container.element)
    if container.tensorish:
        return T.T_TENSOR if container.kind == T.MASK else container
    return None


def _autocast_is_cpu(call: ast.Call) -> bool:
    device = T.keyword(call, "device_type") or (call.args[0] if call.args else None)
    return isinstance(device, ast.Constant) and device.value == "cpu"


def _is_accelerator_stream(call: ast.Call) -> bool:
    """DeepSpeed's `get_accelerator().stream(s)` and similar accelerator wrappers."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "stream"
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, (ast.Name, ast.Attribute))
        and source_text(func.value.func).endswith("get_accelerator")
    )


def _capturing_guard(walker: FunctionWalker, test: ast.expr) -> bool | None:
    """True if ``test`` is "we are capturing", False if "we are not", None otherwise."""
    negate = False
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        negate = not negate
        test = test.operand
    if isinstance(test, ast.Call) and walker.resolve(test.func) in _CAPTURING_GUARDS:
        return not negate
    return None


def _capture_call(stmt: ast.stmt, method: str) -> str | None:
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr == method:
            return source_text(func.value)
    return None


def _ends_capture_inside(stmt: ast.stmt, receiver: str) -> bool:
    """A compound statement (try/finally, with, if) that calls ``receiver.capture_end()``."""
    if not isinstance(stmt, (ast.Try, ast.With, ast.If, ast.For, ast.While)):
        return False
    return any(inner is not stmt and _capture_call(inner, "capture_end") == receiver for inner in _statements([stmt]))


def _exits(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _callee_texts(body: list[ast.stmt], walker: FunctionWalker) -> set[str]:
    """What a block calls, by source text, ignoring torch functions and tensor methods."""
    texts = set()
    for stmt in body:
        for node in _walk_no_defs(stmt):
            if isinstance(node, ast.Call):
                name = walker.resolve(node.func)
                if name is not None and (name.startswith("torch.") or "." not in name):
                    continue
                if isinstance(node.func, ast.Attribute):
                    receiver = walker.ty(node.func.value)
                    if receiver is not None and (receiver.tensorish or receiver.kind in (T.STREAM, T.EVENT, T.GRAPH)):
                        continue
                    if receiver is None and node.func.attr in T.TENSOR_ONLY_METHODS | T.PY_METHODS:
                        continue
                texts.add(source_text(node.func))
    return texts


def _tails(texts: set[str]) -> set[str]:
    return {text.rsplit(".", 1)[-1] for text in texts}


def _has_stream_block(walker: FunctionWalker, node: ast.AST) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, (ast.With, ast.AsyncWith)):
            for item in inner.items:
                ctx = item.context_expr
                if isinstance(ctx, ast.Call) and (
                    walker.resolve(ctx.func) in _STREAM_CONTEXTS or _is_accelerator_stream(ctx)
                ):
                    return True
    return False


def _walk_no_defs(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk that does not enter nested functions, classes or lambdas."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, (*_FUNCTION_NODES, ast.ClassDef, ast.Lambda)):
                stack.append(child)


def _module_level_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Top-level statements, looking into module-level if/try blocks (import guards)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _module_level_statements(stmt.body)
            yield from _module_level_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _module_level_statements(stmt.body)
            for handler in stmt.handlers:
                yield from _module_level_statements(handler.body)
            yield from _module_level_statements(stmt.orelse)


def _classes(body: list[ast.stmt], prefix: str) -> Iterator[tuple[ast.ClassDef, str]]:
    for stmt in _module_level_statements(body):
        if isinstance(stmt, ast.ClassDef):
            qualname = f"{prefix}.{stmt.name}"
            yield stmt, qualname
            for inner in stmt.body:
                if isinstance(inner, ast.ClassDef):
                    yield inner, f"{qualname}.{inner.name}"


def _bound_names(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from _bound_names(elt.value if isinstance(elt, ast.Starred) else elt)


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in ``body`` and its nested blocks, without entering definitions."""
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        yield stmt
        if isinstance(stmt, (*_FUNCTION_NODES, ast.ClassDef)):
            continue
        for name in ("finalbody", "orelse", "body"):
            block = getattr(stmt, name, None)
            if isinstance(block, list):
                stack.extend(reversed(block))
        for handler in getattr(stmt, "handlers", ()):
            stack.extend(reversed(handler.body))
        for case in getattr(stmt, "cases", ()):
            stack.extend(reversed(case.body))


def _all_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, entering function and class bodies too (imports can be anywhere)."""
    for stmt in _statements(body):
        yield stmt
        if isinstance(stmt, (*_FUNCTION_NODES, ast.ClassDef)):
            yield from _all_statements(stmt.body)


def _assigned_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names a function binds locally (assignment, loop and with targets, imports)."""
    names: set[str] = set()
    for stmt in _statements(node.body):
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets = [stmt.target]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            targets = [item.optional_vars for item in stmt.items if item.optional_vars is not None]
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue  # resolved through the file's import map, like module-level imports
        elif isinstance(stmt, (*_FUNCTION_NODES, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Try):
            names.update(h.name for h in stmt.handlers if h.name)
        for target in targets:
            names.update(_bound_names(target))
    return names


def _is_self_attr(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _is_staticmethod(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)


def _keyword_fix(state: ModuleState, call: ast.Call, keyword: str, value: str, message: str) -> Fix:
    """Add ``keyword=value`` to ``call`` (or set it, if the call already passes it)."""
    applicability = "safe" if keyword == "cache_enabled" else "unsafe"
    return Fix(applicability, message, (SetKeyword(state.span(call), keyword, value),))
