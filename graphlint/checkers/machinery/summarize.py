"""The file phase: one pass over a module's syntax tree into a `ModuleSummary`.

It resolves names through imports, gives values a kind (tensor, stream, optimizer, ...),
finds the places that may be capture regions, records every call it can name for the
call graph, and raises the events the enabled rules' detectors answer, which collect
candidate hazards. It never looks at another file: cross-file questions are left as
symbolic references for the project phase.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TypeGuard

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.capture_state import capture_predicates, guard_calls, stream_capture_calls
from graphlint.checkers.machinery.core.kind_inference import GRAPHED_CALLABLES, T_TREE, is_cudagraph_compile
from graphlint.checkers.machinery.core.model import ClassSummary, ModuleSummary
from graphlint.checkers.machinery.core.module_state import FlowHooks, ModuleState
from graphlint.checkers.machinery.core.names import dotted_parts, source_text
from graphlint.checkers.machinery.core.syntax import (
    FUNCTION_NODES,
    all_statements,
    bound_names,
    is_none,
    module_level_statements,
    statements,
)
from graphlint.checkers.machinery.detectors import hooks_for, static_codes
from graphlint.checkers.machinery.dynamic_imports import bind_dynamic_imports, bind_torch_aliases, importer_call
from graphlint.checkers.machinery.flows.replay import replay_flow, replay_sides, runner_trace
from graphlint.checkers.machinery.flows.replay.derived_inputs import derived_args
from graphlint.checkers.machinery.flows.stream import pending_sends, stream_flow, stream_identity
from graphlint.checkers.machinery.host_attributes import host_attributes
from graphlint.checkers.machinery.protocols import PROTOCOL_BASES
from graphlint.checkers.machinery.values import value_facts

# The flows' knowledge the binder uses while it walks (the core imports no flow).
FLOW_HOOKS = FlowHooks(
    device_module_member=stream_identity.device_module_member,
    is_device_module_factory=stream_identity.is_device_module_factory,
    note_capture=replay_flow.note_capture,
)


class FileSummarizer:
    """Builds the `ModuleSummary` of one parsed file."""

    def __init__(
        self, tree: ast.Module, module: str, is_package: bool, source: str, codes: frozenset[str] | None = None
    ) -> None:
        self.source = source
        # Only a file that spells a CUDA-graph mode can hold a cudagraph-compiled function.
        self.cudagraph_modes = bool(_CUDAGRAPH_MODE_TEXT.search(source))
        self.cudagraph_methods: dict[str, list[str]] = {}  # class -> its cudagraph-compiled methods
        hooks = hooks_for(static_codes() | {value_facts.VALUE_FACTS} if codes is None else codes)
        self.state = ModuleState(tree, module, is_package, source.splitlines(), hooks, FLOW_HOOKS)

    def run(self) -> ModuleSummary:
        st = self.state
        self._collect_imports_and_defs()
        predicates = capture_predicates(_module_functions(st), _resolver(st))
        st.guard_calls, st.stream_calls = guard_calls(predicates), stream_capture_calls(predicates)
        self._prescan_module_env()
        self._prescan_classes()
        self._prescan_file_facts()
        module_fn = FunctionWalker(st, f"{st.module}.<module>", "<module>", None, st.tree, outer=None)
        module_fn.walk_body(st.tree.body)
        if value_facts.VALUE_FACTS in st.hooks.codes:  # only runs that follow values solve them
            value_facts.record_facts(st)
        if st.hooks.listens_to(runner_trace.EVENTS):
            runner_trace.record(st)
        if st.hooks.listens_to(replay_flow.EVENTS):
            replay_flow.analyze(st, self.source)
        if "replay" in self.source or "GraphLaunch" in self.source:  # a runner's replay side (reach)
            replay_sides.record(st)
        if st.hooks.listens_to(stream_flow.EVENTS):
            stream_flow.analyze(st, self.source)
        if st.hooks.listens_to(pending_sends.EVENTS):
            pending_sends.analyze(st, self.source)
        return st.summary

    def _collect_imports_and_defs(self) -> None:
        st = self.state
        self._graphed_calls: list[ast.Call] = []
        importers = []  # `torch = pytest.importorskip("torch")` and the like
        for node in all_statements(st.tree.body):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                st.imports.add(node)
            elif isinstance(node, ast.Assign):
                candidate = importer_call(node)
                if candidate is not None:
                    importers.append(candidate)
        bind_dynamic_imports(importers, st.imports)
        bind_torch_aliases(module_level_statements(st.tree.body), st.imports)
        # Whole-tree scans only for files that mention what they look for.
        if "register_generator_state" in self.source or "make_graphed_callables" in self.source:
            for call in ast.walk(st.tree):
                if isinstance(call, ast.Call):
                    func = call.func
                    tail = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                    if tail == "register_generator_state" and call.args:
                        st.registered_generators.add(source_text(call.args[0]))
                    elif tail == "make_graphed_callables":
                        self._graphed_calls.append(call)
        for node in module_level_statements(st.tree.body):
            if isinstance(node, (*FUNCTION_NODES, ast.ClassDef)):
                st.defs[node.name] = f"{st.module}.{node.name}"
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in bound_names(target):
                        st.module_assigned.add(name)
        # Module-level aliases (`X = other.thing`, re-exported imports) for the project phase.
        for local, dotted in st.imports.names.items():
            st.summary.aliases[local] = dotted

    def _prescan_module_env(self) -> None:
        """Module-level values that functions read as globals (model, opt, g, static_x, ...)."""
        st = self.state
        walker = FunctionWalker(st, f"{st.module}.<module>", "<module>", None, st.tree, outer=None, record=False)
        for node in module_level_statements(st.tree.body):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                ty = walker.ty(node.value)
                if ty is not None:
                    st.module_env[node.targets[0].id] = ty
                parts = dotted_parts(node.value)
                if parts is not None:
                    resolved = st.resolve_parts(parts)
                    if resolved:
                        st.summary.aliases[node.targets[0].id] = resolved
        if self.cudagraph_modes:
            for name in _cudagraph_compiled_globals(st, walker):
                st.module_env[name] = T_TREE
            for class_node, class_qualname in _classes(st.tree.body, st.module):
                self.cudagraph_methods[class_qualname] = [
                    item.name
                    for item in class_node.body
                    if isinstance(item, FUNCTION_NODES)
                    and any(is_cudagraph_compile(walker.resolve, d) for d in item.decorator_list)
                ]

    def _prescan_classes(self) -> None:
        st = self.state
        definitions: dict[str, list[ast.ClassDef]] = {}  # every definition: both arms of an `if` count
        for node, qualname in _classes(st.tree.body, st.module):
            st.class_nodes[qualname] = node
            definitions.setdefault(qualname, []).append(node)
            methods = {}
            for item in node.body:
                if isinstance(item, FUNCTION_NODES):
                    methods[item.name] = f"{qualname}.{item.name}"
            bases = []
            for base in node.bases:
                parts = dotted_parts(base)
                resolved = st.resolve_parts(parts) if parts else None
                if resolved:
                    bases.append(resolved)
                elif isinstance(base, ast.Subscript):  # `Protocol[T]`: a Protocol all the same
                    parts = dotted_parts(base.value)
                    resolved = st.resolve_parts(parts) if parts else None
                    if resolved in PROTOCOL_BASES:
                        bases.append(resolved)
            # `@torch.compile(mode="reduce-overhead")` on a method: `self.method(...)` replays a graph.
            st.class_attrs[qualname] = dict.fromkeys(self.cudagraph_methods.get(qualname, ()), T_TREE)
            st.summary.classes[qualname] = ClassSummary(qualname, bases, methods, {})
        # Attribute kinds from `self.x = ...` in every method, __init__ first, and from the
        # class's own attributes a method assigns (`cls.x = ...`, `Noise.x = ...`: a generator or
        # stream built lazily once per process).
        for qualname, node in st.class_nodes.items():
            attrs = st.class_attrs[qualname]
            init_first = sorted(
                (item for item in node.body if isinstance(item, FUNCTION_NODES)),
                key=lambda item: item.name != "__init__",
            )
            for method in init_first:
                _method_attr_kinds(st, qualname, node, method, attrs)
            summary = st.summary.classes[qualname]
            for attr, ty in attrs.items():
                if ty.kind == T.INSTANCE and ty.ref:
                    summary.attr_classes[attr] = ty.ref
            summary.host_attrs = host_attributes(node, attrs, init_first, _resolver(st))
        for qualname, nodes in definitions.items():
            st.summary.classes[qualname].derived_args = derived_args(nodes)

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


_CUDAGRAPH_MODE_TEXT = re.compile(r"reduce-overhead|max-autotune|triton\.cudagraphs")


def _resolver(st: ModuleState) -> Callable[[ast.AST], str | None]:
    """Module-level name resolution (imports, definitions) for annotations in a class body."""

    def resolve(node: ast.AST) -> str | None:
        parts = dotted_parts(node)
        return st.resolve_parts(parts) if parts else None

    return resolve


def _module_functions(st: ModuleState) -> list[tuple[str, ast.AST]]:
    """The module-level functions of the file by qualname, the candidates for capture
    predicates; a name defined twice (if/else branches) or also assigned is left out."""
    defined = [node for node in module_level_statements(st.tree.body) if isinstance(node, FUNCTION_NODES)]
    names = Counter(node.name for node in defined)
    return [
        (f"{st.module}.{node.name}", node)
        for node in defined
        if names[node.name] == 1 and node.name not in st.module_assigned
    ]


def _cudagraph_compiled_globals(st: ModuleState, walker: FunctionWalker) -> Iterator[str]:
    """Module-level names that hold a cudagraph-mode compiled function however the file spells
    it: `@torch.compile(mode="reduce-overhead")` on the definition, or a function that declares
    `global step` and rebinds `step = torch.compile(step, mode=...)` (gpt-fast's main() does)."""
    for node in module_level_statements(st.tree.body):
        if isinstance(node, FUNCTION_NODES) and any(
            is_cudagraph_compile(walker.resolve, d) for d in node.decorator_list
        ):
            yield node.name
    for function in all_statements(st.tree.body):
        if not isinstance(function, FUNCTION_NODES):
            continue
        declared = {name for stmt in statements(function.body) if isinstance(stmt, ast.Global) for name in stmt.names}
        if not declared:
            continue
        for stmt in statements(function.body):
            if isinstance(stmt, ast.Assign) and is_cudagraph_compile(walker.resolve, stmt.value):
                yield from (t.id for t in stmt.targets if isinstance(t, ast.Name) and t.id in declared)


def _classes(body: list[ast.stmt], prefix: str) -> Iterator[tuple[ast.ClassDef, str]]:
    for stmt in module_level_statements(body):
        if isinstance(stmt, ast.ClassDef):
            qualname = f"{prefix}.{stmt.name}"
            yield stmt, qualname
            for inner in stmt.body:
                if isinstance(inner, ast.ClassDef):
                    yield inner, f"{qualname}.{inner.name}"


def _own_class_names(node: ast.ClassDef, method: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """The names a method of ``node`` reaches the class's own attributes through: `self`, the
    class's name, and the first parameter of a classmethod (`cls`)."""
    names = {"self", node.name}
    params = [*method.args.posonlyargs, *method.args.args]
    if params and any(dotted_parts(d) == ["classmethod"] for d in method.decorator_list):
        names.add(params[0].arg)
    return frozenset(names)


def _names_own_attr(target: ast.expr, owners: frozenset[str]) -> TypeGuard[ast.Attribute]:
    """`self.x`, `cls.x` or `Noise.x` in a method of `Noise`."""
    return isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id in owners


def _new_own_attrs(stmt: ast.stmt, owners: frozenset[str], attrs: dict[str, T.Ty]) -> list[ast.Attribute]:
    """The class's own attributes ``stmt`` assigns that have no kind in ``attrs`` yet; none for
    `self.x_t = None` in __init__, whose kind comes from what is assigned later."""
    if isinstance(stmt, ast.Assign) and not is_none(stmt.value):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        targets = [stmt.target]
    else:
        return []
    return [target for target in targets if _names_own_attr(target, owners) and target.attr not in attrs]


def _method_attr_kinds(
    st: ModuleState,
    qualname: str,
    node: ast.ClassDef,
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    attrs: dict[str, T.Ty],
) -> None:
    """The kinds ``method`` of class ``node`` gives its attributes, into ``attrs`` (the first
    assignment seen wins: `__init__` is read first)."""
    owners = _own_class_names(node, method)
    assigning = [stmt for stmt in statements(method.body) if _new_own_attrs(stmt, owners, attrs)]
    if not assigning:
        return  # most methods assign no new attribute: no walker (its set-up reads the whole body)
    walker = FunctionWalker(st, f"{qualname}.{method.name}", method.name, qualname, method, outer=None, record=False)
    for stmt in assigning:
        assert isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None  # `_new_own_attrs`
        ty = walker.ty(stmt.value)
        if ty is None and isinstance(stmt, ast.AnnAssign):
            ty = walker.annotation_ty(stmt.annotation)
        if ty is not None:
            for target in _new_own_attrs(stmt, owners, attrs):  # an earlier statement may have given it
                attrs[target.attr] = ty
