"""The binder: one function (or module body) walked in statement order on the flow skeleton.

Like mypy's binder it keeps what each name holds at each point (a value kind: tensor,
stream, optimizer, instance of a project class, ...), and it is where the file phase meets
the rules: it finds capture regions (`with torch.cuda.graph(...)`, `capture_begin()` ...
`capture_end()`, wrapper context managers decided project-wide), records every call it can
name for the call graph, and raises the syntax events the enabled rules' detectors answer
(`machinery.detectors`). It knows no rule by name.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from graphlint.checkers.machinery.constants import object_marks, param_tests
from graphlint.checkers.machinery.constants.lazy_singletons import builds_singleton
from graphlint.checkers.machinery.constants.present_names import RECEIVERS, holds, present_names
from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.call_naming import CallNaming, hasattr_facts
from graphlint.checkers.machinery.core.call_targets import CallTarget, FunctionTarget
from graphlint.checkers.machinery.core.capture_state import CaptureFlags, capture_value, short_circuited
from graphlint.checkers.machinery.core.capture_values import (
    ACCELERATOR_GRAPHS,
    CAPTURE_CONTEXTS,
    is_graph_context,
    note_assignment,
    other_device_graph,
)
from graphlint.checkers.machinery.core.flow import FlowState, alternative_bodies, walk
from graphlint.checkers.machinery.core.kind_inference import ValueKinds, is_cudagraph_compile
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH, CallRef, EntryRef, FunctionSummary, Hazard, Region
from graphlint.checkers.machinery.core.module_state import ModuleState
from graphlint.checkers.machinery.core.names import dotted_parts, source_text
from graphlint.checkers.machinery.core.syntax import (
    FUNCTION_NODES,
    child_fields,
    exits,
    first_assignments,
    method_call_receiver,
    statements,
)
from graphlint.checkers.machinery.core.tensor_uses import tensor_uses
from graphlint.findings import Fix

STREAM_CONTEXTS = frozenset({"torch.cuda.stream", "torch.cuda.StreamContext", "torch.cuda.streams.StreamContext"})
_AUTOCAST = frozenset({"torch.autocast", "torch.cuda.amp.autocast"})


def _keyword_names(call: ast.Call) -> frozenset[str]:
    """The locals a call passes by keyword (`metadata=metadata`): how an optional parameter,
    one with a `None` default its callee tests, is usually given. Reading the function for what
    is not None costs about a tenth of a cold run when asked for every name a call passes."""
    return frozenset(kw.value.id for kw in call.keywords if isinstance(kw.value, ast.Name)) - RECEIVERS


@dataclass
class WithInside:
    """What ran inside a `with` block, for detectors that judge the block as a whole."""

    regions: list[int]  # capture regions that start inside it
    graphed_calls: bool  # it calls a make_graphed_callables result


@dataclass
class _Block:
    """Per statement list: an open `capture_begin()` span and the guard state to restore."""

    guarded: bool
    body: list[ast.stmt]
    open_capture: tuple[str, tuple[int, ...]] | None = None
    captured: list[ast.stmt] | None = None
    began: int | None = None
    duck_attrs: dict[str, frozenset[str]] = field(default_factory=dict)  # the `hasattr` facts to restore


@dataclass
class _WithFrame:
    regions: tuple[int, ...]
    autocasts: list[ast.Call]
    regions_before: int
    graphed_before: int


@dataclass
class _Fork:
    """The kinds before a set of alternatives, and those each alternative that falls through
    ends with. After them a name keeps a kind where every such alternative agrees, and is a
    tensor that may be on the device where any of them left it there: a tensor moved to the
    host in one arm of an `if` may still be on the device after it."""

    guarded: bool
    env: dict[str, T.Ty]
    ends: list[dict[str, T.Ty]] = field(default_factory=list)

    def ended(self, env: dict[str, T.Ty], body: list[ast.stmt]) -> None:
        if not exits(body):  # an arm that returns, raises or jumps reaches nothing after it
            self.ends.append(env)

    def joined(self, last: dict[str, T.Ty]) -> dict[str, T.Ty]:
        if not self.ends:
            return last  # no arm falls through: what follows is not reached from here
        found: dict[str, T.Ty] = {}
        for name in set().union(*self.ends):
            kinds = [end.get(name) for end in self.ends]
            if all(kind == kinds[0] for kind in kinds) and kinds[0] is not None:
                found[name] = kinds[0]
            elif any(kind is not None and kind.kind in T.ON_DEVICE for kind in kinds):
                found[name] = T.T_TENSOR  # on the device in some arm: it may be here
            else:
                hosts = [kind for kind in kinds if kind is not None and kind.kind in T.ON_HOST]
                if len(hosts) == len(kinds):  # host data in every arm (a host mask padded on the host)
                    masks = all(kind.kind == T.HOST_MASK for kind in hosts)
                    found[name] = T.host_result(hosts, mask=masks) or T.T_HOST
        return found


class FunctionWalker(FlowState):
    """The binder of one function: bindings, regions, calls, and the detectors' events. It owns
    the parts that answer for it: `kinds` (what a value is) and `naming` (what a call runs)."""

    loop_passes = 1  # kinds are not iterated to a fixed point; a second pass would double regions

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
        self.hooks = state.hooks
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
        self.kinds = ValueKinds(state, self.resolve, self.lookup, class_qualname)
        self.naming = CallNaming(self)
        # The queries flows and detectors ask most, bound once: a pass-through method per call
        # costs about 2% of a cold run (over a million calls on torch's tree).
        self.ty: Callable[[ast.AST | None], T.Ty | None] = self.kinds.ty  # the kind of value a node evaluates to
        self.annotation_ty: Callable[[ast.expr], T.Ty | None] = self.kinds.annotation_ty  # what an annotation declares
        self.call_target: Callable[[ast.Call], CallTarget | None] = self.naming.call_target  # what a call runs
        self.capture_contexts: dict[str, ast.Call] = {}  # ctx = torch.cuda.graph(g)
        self.graph_context_names: set[str] = set()  # graph_ctx = torch.cuda.graph (capture_values)
        self.is_module = isinstance(node, ast.Module)
        self.summary = FunctionSummary(qualname, display, getattr(node, "lineno", 1))
        self._blocks: list[_Block] = []
        self._withs: list[_WithFrame] = []
        self.capture_flags = CaptureFlags(node)  # locals holding the capture state (capture_state)
        if record:
            self._register()
        self.duck_attrs: dict[str, frozenset[str]] = {}  # receiver -> attributes `hasattr` showed
        self._duck_saved: dict[int, dict[str, frozenset[str]]] = {}  # id of an `if` -> facts before it
        self.fixed_params: frozenset[str] = frozenset()  # parameters never rebound (`param_tests`)
        self._param_stores: dict[str, int] = {}  # parameter -> the first line that rebinds it
        # calls passing names by keyword, with those names and the parameters fixed there:
        # `walk_function` adds what is not None
        self._named_calls: list[tuple[CallRef, ast.Call, frozenset[str], frozenset[str]]] = []
        if isinstance(node, FUNCTION_NODES):
            assigned = first_assignments(node)
            self.locals |= assigned.keys()
            self._bind_parameters(node)
            self.fixed_params = frozenset(self.summary.params).difference(assigned)
            self._param_stores = {name: assigned[name] for name in self.summary.params if name in assigned}
            self.summary.param_defaults = param_tests.defaults(node.args, self.summary.params)
        # what the function does to its objects' fields (`object_marks`), gathered on the walk
        functional = record and isinstance(node, FUNCTION_NODES)
        self._fields = object_marks.FieldEffects(self.fixed_params, self.st.column) if functional else None
        self._exited = False  # an `if` that leaves (return, raise, break, continue) was walked

    @property
    def body(self) -> list[ast.stmt]:
        return getattr(self.node, "body", [])

    def _register(self) -> None:
        functions = self.st.summary.functions
        if self.qualname in functions:  # a redefinition (if/else branches): keep both bodies checked
            earlier = functions.pop(self.qualname)
            functions[f"{self.qualname}@{earlier.line}"] = earlier
        functions[self.qualname] = self.summary
        self.st.walkers.append(self)

    def _bind_parameters(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        args = node.args
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                self.locals.add(extra.arg)
        for index, arg in enumerate([*args.posonlyargs, *args.args, *args.kwonlyargs]):
            self.locals.add(arg.arg)
            if index == 0 and self.class_qualname and arg.arg in ("self", "cls") and not _is_staticmethod(node):
                if arg.arg == "self":
                    self.env["self"] = T.Ty(T.INSTANCE, ref=self.class_qualname)
                continue
            if index == 0 and self.class_qualname and _autograd_context(node):
                continue  # autograd passes ctx: `Fn.apply(x)` runs `forward(ctx, x)` with x first
            self.summary.params.append(arg.arg)
            if arg.annotation is not None:
                ty = self.kinds.annotation_ty(arg.annotation)
                if ty is not None:
                    self.env[arg.arg] = ty
        self._kinds_from_use(node)

    def _kinds_from_use(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """Unannotated parameters and locals the body uses as tensors are tensors (tensor_uses)."""
        args = node.args
        unannotated = {arg.arg for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs] if arg.annotation is None}
        params = [name for name in self.summary.params if name in unannotated]
        found = tensor_uses(node, params, self.resolve)
        for name in found.params:
            self.env[name] = T.T_TENSOR
        self.kinds.used_as_tensor = found.values

    # -- queries for detectors and flows -------------------------------------------------
    def chain(self) -> Iterator[FunctionWalker]:
        """This walker and the ones of the functions it is nested in, innermost first."""
        walker: FunctionWalker | None = self
        while walker is not None:
            yield walker
            walker = walker.outer

    def lookup(self, name: str) -> T.Ty | None:
        walker: FunctionWalker | None = self  # `chain()` by hand: among the hottest calls of a run
        while walker is not None:
            if name in walker.env:
                return walker.env[name]
            if name in walker.locals and walker is self:
                return None
            walker = walker.outer
        return self.st.module_env.get(name)

    def parameter_annotation(self, name: str) -> ast.expr | None:
        """The annotation of this function's parameter ``name`` (None: no such parameter, or none)."""
        arguments = getattr(self.node, "args", None)
        if not isinstance(arguments, ast.arguments):
            return None
        for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
            if arg.arg == name:
                return arg.annotation
        return None

    def is_local_name(self, name: str) -> bool:
        walker: FunctionWalker | None = self  # `chain()` by hand: among the hottest calls of a run
        while walker is not None:
            if name in walker.locals or name in walker.env or name in walker.local_defs:
                return True
            walker = walker.outer
        return False

    def resolve(self, node: ast.AST) -> str | None:
        """Canonical dotted name of an expression that names an import or a definition."""
        parts = dotted_parts(node)
        if parts is None:
            return self.st.flow_hooks.device_module_member(self, node)  # get_accelerator().stream -> torch.cuda.stream
        root = parts[0]
        walker: FunctionWalker | None = self
        while walker is not None:
            if root in walker.local_defs:
                return ".".join([walker.local_defs[root], *parts[1:]])
            walker = walker.outer
        if self.is_local_name(root) and root not in self.globals:
            return self.st.flow_hooks.device_module_member(self, node)  # self._device_module.Event -> torch.cuda.Event
        if self.is_module and root in self.st.module_env:
            return self.st.flow_hooks.device_module_member(self, node)
        return self.st.resolve_parts(parts) or self.st.flow_hooks.device_module_member(self, node)

    def is_global_name(self, name: str) -> bool:
        return name in self.globals or (self.is_module and name in self.st.module_assigned)

    def generator_registered(self, node: ast.expr) -> bool:
        """Registered with a graph of this file as written here, or, for the class's own
        attribute read through `cls`, as `Class.attr` (`g.register_generator_state(Noise.gen)`)."""
        registered = self.st.registered_generators
        if source_text(node) in registered:
            return True
        if not isinstance(node, ast.Attribute):
            return False
        owner = self.kinds.class_named(node.value)
        return owner is not None and f"{owner.rpartition('.')[2]}.{node.attr}" in registered

    def is_graphed_module(self, node: ast.expr) -> bool:
        return source_text(node) in self.st.graphed_modules

    def is_stream_context(self, call: ast.Call) -> bool:
        """`torch.cuda.stream(s)`, StreamContext, and the same through a device module
        (`get_accelerator().stream(s)`, `torch.get_device_module().stream(s)`: see `resolve`)."""
        return self.resolve(call.func) in STREAM_CONTEXTS

    def forget_kinds(self) -> None:
        """Drop memoised kinds: bindings changed (a flow walks the body again)."""
        self.kinds.forget()

    def capturing_guard(self, test: ast.expr) -> bool | None:
        """True if ``test`` holds whenever we are capturing (its else-branch never runs in a
        capture: `if is_current_stream_capturing():`), False if ``test`` implies we are not
        (its body never runs in one: `if not is_compiling() and cuda.is_initialized():`),
        None otherwise. `and`/`or` combine the parts; a guard among other conditions still
        guards the branch it decides alone. A test of the device is one too:
        `if x.device.type == "cpu":` (or `not x.is_cuda`) runs no CUDA work, so nothing in it
        is captured; `if x.is_cuda: ... else:` is the reverse. The file's own helpers that
        return the capture state count as the query they wrap (`capture_state`)."""
        return capture_value(test, self.resolve, self.st.guard_calls, self._guard_leaf)

    def _guard_leaf(self, test: ast.expr) -> bool | None:
        """A part of a test that is no capture-state call: a local flag holding one, or a device test."""
        flag = self.capture_flags.value(test, self.regions)
        return flag if flag is not None else device_test(test)

    def stream_capture_value(self, expr: ast.expr) -> bool | None:
        """The value of ``expr`` in every stream capture (no Dynamo query, no device test decides
        it): what a local flag holds, and what short-circuits an `and`/`or`."""
        return capture_value(expr, self.resolve, self.st.stream_calls, self._flag)

    def _flag(self, expr: ast.expr) -> bool | None:
        return self.capture_flags.value(expr, self.regions)

    def non_cuda_branch(self, test: ast.expr, index: int) -> bool:
        """Is alternative ``index`` of `if test:` one that runs on a device other than CUDA?"""
        negate = False
        while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            negate = not negate
            test = test.operand
        device = device_test(test)
        if device is None:
            return False
        return (device != negate) == (index == 1)

    # -- what the walk records -------------------------------------------------------------
    def hazard(
        self,
        code: str,
        node: ast.AST,
        message: str,
        fix: Fix | None = None,
        always: bool = False,
        condition: tuple[str | int, ...] = (),
        preview: bool = False,
    ) -> None:
        """A candidate finding at ``node``; the project phase decides whether it is one.
        ``condition``: what the rule's detector confirms there (`Hazard`, `Detector.holds`).
        ``preview``: a newer behaviour of a default-set rule, reported only in preview mode."""
        if not self.record or (self.guarded and not always):
            return
        line, col, end_line, end_col = self.st.span(node)
        self.summary.hazards.append(
            Hazard(
                code,
                message,
                line,
                col,
                end_line,
                end_col,
                self.regions,
                fix,
                always,
                condition,
                preview,
            )
        )

    def emit(self, event: object) -> None:
        """Hand a flow's event to the detectors that answer it."""
        self.hooks.emit(self, event)

    def record_call(self, target: CallTarget, node: ast.Call) -> None:
        if self.record and not self.guarded:
            line, col, end_line, end_col = self.st.span(node)
            fixed = self._fixed_at(line)
            self.summary.calls.append(
                CallRef(
                    target,
                    line,
                    col,
                    self.regions,
                    self.naming.typed_args(node),
                    end_line,
                    end_col,
                    param_tests.passed(node, fixed),
                )
            )
            names = _keyword_names(node)
            if names:
                self._named_calls.append((self.summary.calls[-1], node, names, fixed))

    def walk_function(self) -> None:
        """Walk the function's body, then give the calls that pass a name by keyword what
        `present_names` knows there: read once, at the end, for those names only."""
        self.walk_body(self.body)
        if not isinstance(self.node, FUNCTION_NODES):
            return
        self._note_fields(self.node)
        if not self._named_calls:
            return
        wanted = frozenset().union(*(names for _, _, names, _ in self._named_calls))
        until = max(ref.line for ref, *_ in self._named_calls)
        present = present_names(self.node, self.st.lines, wanted, until)
        for ref, call, names, fixed in self._named_calls:
            known = frozenset(name for name in names if holds(present, name, ref.line))
            if known:
                ref.passed = param_tests.passed(call, fixed, known)

    def _note_fields(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """What the function does to its objects' fields, and its predicate (`object_marks`);
        nothing for code not recorded (a module's body, a walk that only reads kinds)."""
        if self._fields is None:
            return
        enclosing = self.outer.locals if self.outer is not None and not self.outer.is_module else None
        self.summary.effects = self._fields.finish(node, self.locals, enclosing)
        if self.class_qualname is not None:
            self.summary.predicate = object_marks.predicate(node)

    def _always(self) -> bool:
        """Whether the current statement runs whenever the function gets this far: no branch or
        loop around it, no early return above it."""
        return not self._exited and all(frame.kind in ("with", "try") for frame in self._frames)

    def enter_loop(self, stmt: ast.For | ast.AsyncFor | ast.While) -> None:
        if self._fields is not None:
            self._fields.loop(stmt)

    def _new_region(self, node: ast.stmt, label: str, target: CallTarget | None, kind: str = GRAPH) -> int:
        self.st.summary.regions.append(Region(node.lineno, label, target, kind))
        return len(self.st.summary.regions) - 1

    def _event(self, name: str, *args: object) -> None:
        for hook in self.hooks.get(name):
            hook(self, *args)

    # -- the walk ------------------------------------------------------------------------
    def walk_body(self, body: list[ast.stmt]) -> None:
        walk(self, body)

    def begin_block(self, body: list[ast.stmt]) -> None:
        self._blocks.append(_Block(self.guarded, body, duck_attrs=self.duck_attrs))

    def end_block(self, body: list[ast.stmt]) -> None:
        block = self._blocks.pop()
        if block.open_capture is not None:
            self.regions = block.open_capture[1]
            self.summary.opens_capture = True  # a breakable graph's begin: the caller's code is captured
        self.guarded = block.guarded
        self.duck_attrs = block.duck_attrs  # `if not hasattr(...): return` shows it to the block's end only

    def before(self, stmt: ast.stmt) -> None:
        """Track `capture_begin()` ... `capture_end()` spans among a block's statements."""
        self.kinds.forget()  # bindings change between statements
        block = self._blocks[-1]
        begin = method_call_receiver(stmt, "capture_begin")
        if begin is not None and block.open_capture is None:
            block.began = self._new_region(stmt, f"{begin}.capture_begin()", None)
            block.open_capture = (begin, self.regions)
            block.captured = []
            return
        end = method_call_receiver(stmt, "capture_end")
        if end is not None and block.open_capture is not None and end == block.open_capture[0]:
            self._close_capture(stmt, block)
        elif end is not None and not any(b.open_capture and b.open_capture[0] == end for b in self._blocks):
            self.summary.closes_capture = True  # ends what another method began
        if block.open_capture is not None and block.captured is not None:
            block.captured.append(stmt)

    def after(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.If) and (exits(stmt.body) or exits(stmt.orelse)):
            self._exited = True
        block = self._blocks[-1]
        if block.began is not None:
            self.regions = (*self.regions, block.began)
            block.began = None
            return
        if block.open_capture is not None and _ends_capture_inside(stmt, block.open_capture[0]):
            self._close_capture(stmt, block)  # try: ... finally: g.capture_end()
        if isinstance(stmt, ast.Assert):  # `assert p is not None`: the rest runs only if it holds
            self._note_decided(stmt.test, True, block.body[block.body.index(stmt) + 1 :])
            return
        if not isinstance(stmt, ast.If):
            return
        if self.capturing_guard(stmt.test) is True and exits(stmt.body):
            if not self.guarded:
                self.guarded = True  # `if capturing: return ...`: the rest never runs in capture
                self._note_guarded(block.body[block.body.index(stmt) + 1 :])
        if exits(stmt.body) != exits(stmt.orelse):  # `if not p: return`: the rest needs p
            self._note_decided(stmt.test, not exits(stmt.body), block.body[block.body.index(stmt) + 1 :])
        test = stmt.test
        if exits(stmt.body) and isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            self._show_attrs(hasattr_facts(test.operand))  # `if not hasattr(m, "a"): continue`
        if exits(stmt.body) and not stmt.orelse:  # `if x.device.type != "cpu": raise ...`
            self._bind_host(off_cuda(test, holds=False))

    def _close_capture(self, end: ast.stmt, block: _Block) -> None:
        """Record a capture_begin()/capture_end() span for the replay flow."""
        assert block.open_capture is not None
        graph = None
        for inner in statements([end]):
            if method_call_receiver(inner, "capture_end") is not None:
                graph = inner.value.func.value  # type: ignore[attr-defined]
                break
        if self.record and graph is not None and block.captured:
            last = end.end_lineno or end.lineno
            self.st.flow_hooks.note_capture(self, block.captured, graph, block.captured[0].lineno, last)
        self.regions = block.open_capture[1]
        block.open_capture = None
        block.captured = None

    def definition(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, FUNCTION_NODES):
            self._nested_function(stmt)
        elif isinstance(stmt, ast.ClassDef) and self.is_module:
            self._class_body(stmt, f"{self.st.module}.{stmt.name}")

    def header(self, expr: ast.expr, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            return  # the context expressions are visited with their items (enter_with)
        facts = hasattr_facts(expr) if isinstance(stmt, ast.If) else None
        if facts:  # `if hasattr(m, "a") and m.a():` calls m.a only where m has it
            before = self.duck_attrs
            self._show_attrs(facts)
            self.expr(expr)
            self.duck_attrs = before
        else:
            self.expr(expr)
        if isinstance(stmt, ast.While):
            self._test(expr, "while")
        elif isinstance(stmt, ast.If) and (self.capturing_guard(expr) is None or isinstance(expr, ast.BoolOp)):
            self._test(expr, "if")  # a guard's other conditions still run in capture
        elif isinstance(stmt, ast.Match) and expr is not stmt.subject:
            self._event("test", expr, "case guard")

    def _test(self, expr: ast.expr, what: str) -> None:
        """A condition is tested; of `a and b` only the operands a capture evaluates are."""
        if isinstance(expr, ast.BoolOp):
            skipped = short_circuited(expr, self.stream_capture_value)
            if skipped:
                for operand in expr.values[: len(expr.values) - len(skipped)]:
                    self._event("test", operand, what)
                return
        self._event("test", expr, what)

    def loop_target(self, stmt: ast.For | ast.AsyncFor) -> None:
        it = stmt.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            if not self.is_local_name("range"):
                self._bind(stmt.target, T.T_PY)  # `for i in range(n)`: a Python int
                return
        self._bind(stmt.target, _element_ty(self.ty(stmt.iter)))

    def fork(self, stmt: ast.stmt) -> _Fork:
        return _Fork(self.guarded, dict(self.env))

    def branch(self, stmt: ast.stmt, index: int, start: _Fork) -> None:
        """Each alternative starts from the kinds before it (`_Fork`); under `if capturing:` the
        else-branch never runs in capture, and the reverse."""
        if index:
            start.ended(self.env, alternative_bodies(stmt)[index - 1])
            self.env = dict(start.env)
        if not isinstance(stmt, ast.If):
            return
        self._note_decided(stmt.test, index == 0, stmt.body if index == 0 else stmt.orelse)
        if index == 0:  # an `if` always has both alternatives: the `else` arm gets the facts back
            self._duck_saved[id(stmt)] = self.duck_attrs
            self._show_attrs(hasattr_facts(stmt.test))
        else:
            self.duck_attrs = self._duck_saved.pop(id(stmt))
        guard = self.capturing_guard(stmt.test)
        if guard is None and builds_singleton(stmt, self.node):
            guard = False  # built by the warm-up, once per process (`lazy_singletons`)
        if guard is not None:
            self.guarded = start.guarded or (not guard if index == 0 else guard)
            if self.guarded and not start.guarded and isinstance(stmt, ast.If):
                self._note_guarded(stmt.body if index == 0 else stmt.orelse)

    def join(self, stmt: ast.stmt, start: _Fork) -> None:
        self.guarded = start.guarded
        start.ended(self.env, alternative_bodies(stmt)[-1])
        self.env = start.joined(self.env)

    def _show_attrs(self, facts: dict[str, frozenset[str]]) -> None:
        """From here on (until the branch or block ends) these receivers have these attributes."""
        if facts:
            shown = dict(self.duck_attrs)
            for key, attrs in facts.items():
                shown[key] = shown.get(key, frozenset()) | attrs
            self.duck_attrs = shown

    def simple(self, stmt: ast.stmt) -> None:
        if self._fields is not None:
            self._fields.simple(stmt, self._always())
        handler = _SIMPLE.get(type(stmt))
        if handler is not None:
            handler(self, stmt)
            return
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                self.expr(child)

    def _assign(self, stmt: ast.Assign) -> None:
        self.expr(stmt.value)
        self._event("Assign", stmt)
        if (
            isinstance(stmt.value, ast.Call)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and (is_graph_context(self, stmt.value.func) or self.resolve(stmt.value.func) in ACCELERATOR_GRAPHS)
        ):
            self.capture_contexts[stmt.targets[0].id] = stmt.value
        value_ty = self.ty(stmt.value)
        flag = self.stream_capture_value(stmt.value) if len(stmt.targets) == 1 else None
        for target in stmt.targets:
            self.capture_flags.note(target, flag, self.regions)
            note_assignment(self, target, stmt.value)
            self.expr_target(target)
            self._bind(target, value_ty)

    def _ann_assign(self, stmt: ast.AnnAssign) -> None:
        if stmt.value is not None:
            self.expr(stmt.value)
            self.capture_flags.note(stmt.target, self.stream_capture_value(stmt.value), self.regions)
            note_assignment(self, stmt.target, stmt.value)
            self._bind(stmt.target, self.ty(stmt.value) or self.kinds.annotation_ty(stmt.annotation))

    def _aug_assign(self, stmt: ast.AugAssign) -> None:
        self.expr(stmt.value)
        self.expr_target(stmt.target)
        self._event("AugAssign", stmt)

    def _assert(self, stmt: ast.Assert) -> None:
        self.expr(stmt.test)
        self._test(stmt.test, "assert")
        if stmt.msg is not None:
            self.expr(stmt.msg)
        self._bind_host(off_cuda(stmt.test, holds=True))  # `assert x.is_cpu`

    def _bind_host(self, name: str | None) -> None:
        """A tensor the code has just shown is not on a CUDA device is host data from here on:
        what it computes syncs nothing and records no copy from the host."""
        if name is not None:
            self.env[name] = T.Ty(T.HOST)

    def _global(self, stmt: ast.Global | ast.Nonlocal) -> None:
        self.globals.update(stmt.names)

    def _return(self, stmt: ast.Return) -> None:
        if stmt.value is not None:
            self.expr(stmt.value)
            self._note_wrapper_return(stmt.value)

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

    def _nested_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if self.is_module:
            qualname, display, outer = f"{self.st.module}.{node.name}", node.name, None
        else:
            qualname = f"{self.qualname}.<locals>.{node.name}"
            display = f"{self.display}.<locals>.{node.name}"
            self.local_defs[node.name] = qualname
            outer = self
        self._decorators(node, qualname)
        walker = FunctionWalker(self.st, qualname, display, None, node, outer=outer, record=self.record)
        walker.walk_function()

    def _class_body(self, node: ast.ClassDef, qualname: str) -> None:
        for item in node.body:
            if isinstance(item, FUNCTION_NODES):
                method_qualname = f"{qualname}.{item.name}"
                self._decorators(item, method_qualname)
                display = f"{node.name}.{item.name}"
                walker = FunctionWalker(self.st, method_qualname, display, qualname, item, None, self.record)
                walker.walk_function()
            elif isinstance(item, ast.ClassDef):
                self._class_body(item, f"{qualname}.{item.name}")

    def _decorators(self, node: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str) -> None:
        for decorator in node.decorator_list:
            if is_cudagraph_compile(self.resolve, decorator):
                entry = EntryRef(FunctionTarget(qualname), node.lineno, COMPILE, self.display, False)
                self.st.summary.entries.append(entry)

    # -- with blocks -----------------------------------------------------------------------
    def enter_with(self, stmt: ast.With | ast.AsyncWith) -> None:
        if self._fields is not None:
            self._fields.with_items(stmt, self._always())
        frame = _WithFrame(self.regions, [], len(self.st.summary.regions), self.graphed_calls)
        pushed: list[int] = []
        for item in stmt.items:
            context = item.context_expr
            self.expr(context)
            if item.optional_vars is not None:
                self._bind(item.optional_vars, None)
            if isinstance(context, ast.Name) and context.id in self.capture_contexts:
                context = self.capture_contexts[context.id]  # ctx = torch.cuda.graph(g) ... with ctx:
            if isinstance(context, ast.Call) and self.resolve(context.func) in ACCELERATOR_GRAPHS:
                self._accelerator_capture(stmt, item, context, pushed)
            elif isinstance(context, ast.Call):
                self._with_context(stmt, context, pushed, frame)
        self._withs.append(frame)
        frame.regions_before = len(self.st.summary.regions)
        self.regions = (*frame.regions, *pushed)

    def _accelerator_capture(
        self, stmt: ast.With | ast.AsyncWith, item: ast.withitem, made: ast.Call, pushed: list[int]
    ) -> None:
        """`with stream, g:` where `g = torch.accelerator.Graph()` (torch 2.13): the graph object is
        its own capture context. The detectors see it as `torch.cuda.graph(g)` would be seen: a
        call whose first argument is the graph, placed where the `with` names it."""
        graph = item.context_expr if isinstance(item.context_expr, ast.Name) else item.optional_vars
        shown = f"torch.accelerator.Graph({source_text(graph) if graph is not None else ''})"
        pushed.append(self._new_region(stmt, shown, None))
        context = ast.copy_location(
            ast.Call(func=made.func, args=[graph] if graph is not None else [], keywords=[]), item.context_expr
        )
        context.end_lineno, context.end_col_offset = item.context_expr.end_lineno, item.context_expr.end_col_offset
        self._event("capture", stmt, context)
        if self.record:
            self.st.flow_hooks.note_capture(self, stmt.body, graph, stmt.lineno, stmt.end_lineno or stmt.lineno)

    def _with_context(
        self, stmt: ast.With | ast.AsyncWith, context: ast.Call, pushed: list[int], frame: _WithFrame
    ) -> None:
        name = self.resolve(context.func)
        if other_device_graph(context):
            return  # `torch.xpu.graph(xpu_graph=g)`: another device's capture, not CUDA's
        if name in CAPTURE_CONTEXTS or is_graph_context(self, context.func):
            graph = context.args[0] if context.args else T.keyword(context, "cuda_graph")
            shown = name if name in CAPTURE_CONTEXTS else source_text(context.func)  # graph_ctx(...): as written
            pushed.append(self._new_region(stmt, f"{shown}({source_text(graph) if graph else ''})", None))
            self._event("capture", stmt, context)
            if self.record:
                self.st.flow_hooks.note_capture(self, stmt.body, graph, stmt.lineno, stmt.end_lineno or stmt.lineno)
        elif isinstance(context.func, ast.Attribute) and context.func.attr == "capture_to_graph":
            pushed.append(self._new_region(stmt, "capture_to_graph(...)", None))
        elif self.is_stream_context(context):
            stream = context.args[0] if context.args else T.keyword(context, "stream")
            if stream is not None:
                self._event("stream_context", stmt, stream)
        elif name in _AUTOCAST:
            frame.autocasts.append(context)
        else:
            target = self.call_target(context)
            if target is not None:
                pushed.append(self._new_region(stmt, f"{source_text(context.func)}(...)", target))

    def exit_with(self, stmt: ast.With | ast.AsyncWith) -> None:
        frame = self._withs.pop()
        self.regions = frame.regions
        if not frame.autocasts:
            return
        inside = WithInside(
            list(range(frame.regions_before, len(self.st.summary.regions))),
            self.graphed_calls > frame.graphed_before,
        )
        for context in frame.autocasts:
            self._event("autocast", stmt, context, inside)

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
        """Raise the expression events on ``node`` and everything inside it (not lambdas)."""
        stack: list[ast.AST] = [node]
        pop, push = stack.pop, stack.append
        hooks = self.hooks
        while stack:
            current = pop()
            kind = type(current)
            if kind is ast.Call:  # `kind is`, not isinstance: the hottest loop of a cold run
                self._visit_call(cast(ast.Call, current))
            elif kind is ast.Subscript:
                for hook in hooks.get("Subscript"):
                    hook(self, current)
            elif kind is ast.IfExp:
                self._test(cast(ast.IfExp, current).test, "conditional expression")
            elif kind is ast.JoinedStr:
                for hook in hooks.get("JoinedStr"):
                    hook(self, current)
            elif kind is ast.Lambda:
                continue
            elif kind is ast.BoolOp and not self.guarded:
                self._short_circuit(cast(ast.BoolOp, current), push)
                continue
            elif (kind is ast.Yield or kind is ast.YieldFrom) and self.regions:
                # @contextmanager yielding inside a capture: the caller's with-body is captured.
                if any(self.st.summary.regions[r].target is None for r in self.regions):
                    self.summary.returns_capture = True
            for name in child_fields(kind):
                value = getattr(current, name)
                if type(value) is list:
                    for item in value:
                        if item is not None:
                            push(item)
                elif value is not None:
                    push(value)

    def _note_guarded(self, nodes: list) -> None:
        """Code that never runs in a capture: the value flow's calls there are no capture's."""
        if nodes and self.record:
            start, end = self.st.span(nodes[0]), self.st.span(nodes[-1])
            self.summary.guarded_spans.append((*start[:2], *end[2:]))

    def _fixed_at(self, line: int) -> frozenset[str]:
        """The parameters that still hold what the caller passed at ``line``: never rebound, or
        rebound only below it outside loops (`if mask is None: mask = build()` tests the caller's)."""
        if not self._param_stores:
            return self.fixed_params
        if any(frame.kind == "loop" for frame in self._frames):
            return self.fixed_params
        stores = self._param_stores
        return frozenset(name for name in self.summary.params if stores.get(name, line + 1) > line)

    def _note_decided(self, test: ast.expr, needs: bool, nodes: list[ast.stmt]) -> None:
        """Code that runs only when a test on the parameters gives ``needs``: the project phase
        decides it from the constants the capturing call sites pass (`param_tests`)."""
        if not nodes or not self.record or not self.summary.params:
            return
        fixed = self._fixed_at(test.lineno)
        if not fixed:
            return
        found = param_tests.read_test(test, fixed)
        if found is not None:
            start, end = self.st.span(nodes[0]), self.st.span(nodes[-1])
            self.summary.decided_spans.append((found, needs, (*start[:2], *end[2:])))

    def _short_circuit(self, test: ast.BoolOp, push: Callable[[ast.AST], None]) -> None:
        """`not capturing and x.item()`: the operands after the one that ends the evaluation in a
        capture never run there; they are walked as guarded code."""
        skipped = short_circuited(test, self.stream_capture_value)
        for operand in test.values[: len(test.values) - len(skipped)]:
            push(operand)
        if skipped:
            self._note_guarded(skipped)
            self.guarded = True
            for operand in skipped:
                self.expr(operand)
            self.guarded = False

    def _visit_call(self, call: ast.Call) -> None:
        name = self.resolve(call.func)
        for hook in self.hooks.get("Call"):
            hook(self, call, name)
        self.naming.note_entries(call, name)
        callee = self.ty(call.func)
        if callee is not None and callee.kind == T.GRAPHED:
            self.graphed_calls += 1
        target = self.call_target(call)
        if target is not None:
            self.record_call(target, call)
            return
        if self.regions and self.record and not self.guarded:
            self.naming.opaque(call.func, call, "call")
        if self.record:
            target = self.naming.value_call(call)
            if target is not None:
                self.record_call(target, call)

    def _note_wrapper_return(self, value: ast.expr) -> None:
        """`def capture_to_graph(g): return torch.cuda.graph(g)` is itself a capture entry point."""
        if not isinstance(value, ast.Call):
            return
        if is_graph_context(self, value.func) or (
            isinstance(value.func, ast.Attribute) and value.func.attr == "capture_to_graph"
        ):
            self.summary.returns_capture = True
            return
        target = self.call_target(value)
        if target is not None and self.record:
            self.summary.returns.append(target)


# Each handler takes the statement type it is filed under, which a dict's type cannot say key by key.
_SIMPLE: dict[type[ast.stmt], Callable[[FunctionWalker, Any], None]] = {
    ast.Assign: FunctionWalker._assign,
    ast.AnnAssign: FunctionWalker._ann_assign,
    ast.AugAssign: FunctionWalker._aug_assign,
    ast.Assert: FunctionWalker._assert,
    ast.Global: FunctionWalker._global,
    ast.Nonlocal: FunctionWalker._global,
    ast.Return: FunctionWalker._return,
}


def _element_ty(container: T.Ty | None) -> T.Ty | None:
    if container is None:
        return None
    if container.element:
        return T.Ty(T.INSTANCE, ref=container.element)
    if container.tensorish:
        return T.unmasked(container)
    return None


def _ends_capture_inside(stmt: ast.stmt, receiver: str) -> bool:
    """A compound statement (try/finally, with, if) that calls ``receiver.capture_end()``."""
    if isinstance(stmt, ast.Expr):
        return False
    return any(
        inner is not stmt and method_call_receiver(inner, "capture_end") == receiver for inner in statements([stmt])
    )


def _is_staticmethod(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)


def _autograd_context(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A custom autograd Function's `forward(ctx, ...)` or `backward(ctx, ...)`: a staticmethod
    whose first parameter autograd fills, so callers' arguments start at the second."""
    args = [*node.args.posonlyargs, *node.args.args]
    return node.name in _AUTOGRAD_STEPS and bool(args) and args[0].arg == "ctx" and _is_staticmethod(node)


_AUTOGRAD_STEPS = frozenset({"forward", "backward"})  # what autograd calls with ctx first
_OTHER_DEVICES = frozenset({"cpu", "npu", "xpu", "hpu", "mps", "meta", "mlu", "musa", "tpu", "xla"})


def device_test(test: ast.expr) -> bool | None:
    """True if ``test`` holds exactly on CUDA (`x.is_cuda`, `x.device.type == "cuda"`), False if
    it holds exactly on another device (`x.is_cpu`, `device.type == "cpu"`, `!= "cuda"`,
    `current_platform.is_npu()`), None if it says neither."""
    if isinstance(test, ast.Attribute) and test.attr in ("is_cuda", "is_cpu"):
        return test.attr == "is_cuda"
    if isinstance(test, ast.Call) and not test.args:
        func = test.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name == "is_cuda":
            return True
        if name.startswith("is_") and name[3:] in _OTHER_DEVICES:
            return False
        return None
    compared = _device_comparison(test)
    if compared is None:
        return None
    _, kind, equal = compared
    if kind == "cuda":
        return equal
    return False if equal and kind in _OTHER_DEVICES else None


def _device_comparison(test: ast.expr) -> tuple[ast.expr, str, bool] | None:
    """`x.device.type == "cpu"` (either side, `==` or `!=`): the device expression, the device
    kind compared with (`cuda:1` is `cuda`), and whether the test is `==`."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
        return None
    subject, other = test.left, test.comparators[0]
    if isinstance(subject, ast.Constant):
        subject, other = other, subject
    if not (isinstance(other, ast.Constant) and isinstance(other.value, str)):
        return None
    text = source_text(subject)
    if not (text.endswith(".type") or "device" in text.split(".")[-1]):
        return None
    return subject, other.value.split(":")[0], isinstance(test.ops[0], ast.Eq)


_DEVICE_ATTRS = frozenset({"device", "is_cuda", "is_cpu"})


def off_cuda(test: ast.expr, holds: bool) -> str | None:
    """The tensor (a plain name) that is not on a CUDA device wherever ``test`` is ``holds``:
    `x.device.type != "cpu"` or `x.is_cuda` false, `x.is_cpu` or `x.device.type == "cpu"`
    true; None when the test says no such thing. A validator that raises unless its tensor was
    copied to the host is then known to read host data only."""
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, holds = test.operand, not holds
    compared = _device_comparison(test)
    subject = _device_subject(compared[0] if compared is not None else test)
    if subject is None:
        return None
    on_cuda = device_test(test)  # True: it holds exactly on CUDA; False: exactly elsewhere
    if on_cuda is None and compared is not None and not compared[2] and compared[1] in _OTHER_DEVICES:
        on_cuda = True  # `!= "cpu"` is false exactly on the CPU, as `is_cuda` is false off CUDA
    if on_cuda is None:
        return None
    return subject if holds != on_cuda else None


def _device_subject(node: ast.expr) -> str | None:
    """`x` of `x.is_cuda`, `x.device`, `x.device.type`."""
    if isinstance(node, ast.Attribute) and node.attr == "type":
        node = node.value
    if isinstance(node, ast.Attribute) and node.attr in _DEVICE_ATTRS and isinstance(node.value, ast.Name):
        return node.value.id
    return None
