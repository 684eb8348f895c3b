"""GL2xx: what happens around replay. Every replay writes the same output memory and reads
the same input memory, so kept outputs go stale and rebound inputs are ignored, silently.

For each capture the file phase records the graph (`g`, `self.graph`, `self.graphs[bs]`),
its static inputs (tensors read in the capture that were defined before it) and its static
outputs (names, `self` attributes and container slots bound in it). A flow pass over every
function that can see the capture then follows statement order, with loops run twice (a
replay in iteration k+1 follows what iteration k kept) and branches taken in sequence:

- GL201: a static output (or a view of it) kept in another name, a container or an
  attribute, and read after a later replay; or accumulated in a container in a replay loop.
  A function that replays and returns a static output is a legitimate runner: its callers
  receive a static output, and keeping it across a later call is GL201 at the caller, across
  files (the project phase finishes that part from the events recorded here).
- GL202: a static input rebound (`static_x = batch`) before a replay.
- GL203: a replay loop whose fresh per-iteration data never reaches a static input.
- GL204: `resize_`, `set_` or `.data =` on a static input after capture.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from graphlint.checkers import types as T
from graphlint.checkers.names import evaluation_order, source_text
from graphlint.findings import Fix
from graphlint.fix_ops import AppendMethodCall, ReplaceAssignWithCopy
from graphlint.registry import Rule, declare

if TYPE_CHECKING:
    from graphlint.checkers.summarize import FunctionWalker, ModuleState

declare(
    Rule(
        code="GL201",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 12 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="static-output-aliased-across-replay",
        fix="safe",
        summary=(
            "A tensor bound in a capture (a static output), or the output of a graphed callable "
            "or of a function that replays and returns one, kept without `.clone()` (in another "
            "name, a container, an attribute, or yielded from a replay loop) and read after a "
            "later replay or call."
        ),
        why=(
            "Every replay writes its outputs into the same memory. A kept reference is not a "
            "snapshot: after the next replay it silently holds the newest values, so a list of "
            "per-batch results ends up with the last batch repeated."
        ),
        example="""
            results = []
            for batch in loader:
                static_x.copy_(batch)
                g.replay()
                results.append(static_out)
        """,
        use_instead="""
            results = []
            for batch in loader:
                static_x.copy_(batch)
                g.replay()
                results.append(static_out.clone())
        """,
    )
)
declare(
    Rule(
        code="GL202",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 4 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="static-input-rebound",
        fix="unsafe",
        summary=(
            "A name read in a capture (a static input) rebound after the capture "
            "(`static_x = batch`, `self.static_x = batch`, `static_x = static_x.to(...)`) "
            "before a `replay()`."
        ),
        why=(
            "The graph holds the address of the tensor it captured. Rebinding the Python name "
            "points the name at new memory and leaves the graph reading the old buffer: the new "
            "data is ignored without any error."
        ),
        example="""
            for batch in loader:
                static_x = batch
                g.replay()
        """,
        use_instead="""
            for batch in loader:
                static_x.copy_(batch)
                g.replay()
        """,
    )
)
declare(
    Rule(
        code="GL203",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 3 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="replay-without-input-update",
        summary=(
            "A loop that calls `g.replay()` with fresh per-iteration data (a loop target, "
            "`next(it)`) that never reaches any static input (`copy_`, slice assignment, "
            "`index_copy_`, ...) before the replay."
        ),
        why="The graph recomputes on the inputs it already had: every iteration returns the same result.",
        example="""
            for batch in loader:
                g.replay()
                outputs.append(static_out.clone())
        """,
        use_instead="""
            for batch in loader:
                static_x.copy_(batch)
                g.replay()
                outputs.append(static_out.clone())
        """,
    )
)
declare(
    Rule(
        code="GL204",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 4 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="static-input-reallocated",
        summary="`resize_`, `set_` or `.data =` on a static input after its capture.",
        why=(
            "The captured kernels keep the old address. Reallocating the tensor frees or moves "
            "its storage, and replays read and write freed or reused memory."
        ),
        example="""
            with torch.cuda.graph(g):
                out = model(static_x)
            static_x.resize_(new_batch, dim)
        """,
        use_instead="""
            static_x = torch.empty(max_batch, dim, device="cuda")
            with torch.cuda.graph(g):
                out = model(static_x[:batch])
            # one graph per shape: capture again for another batch size
        """,
    )
)

# Operations whose result may share memory with their input: keeping one keeps the buffer.
_ALIASING_METHODS = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "detach",
        "narrow",
        "squeeze",
        "unsqueeze",
        "transpose",
        "permute",
        "expand",
        "expand_as",
        "as_strided",
        "flatten",
        "unflatten",
        "contiguous",
        "float",
        "half",
        "bfloat16",
        "to",
        "type_as",
        "chunk",
        "split",
        "unbind",
        "t",
        "movedim",
        "select",
        "diagonal",
        "real",
        "requires_grad_",
    }
)
_ALIASING_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag"})
_INPUT_WRITERS = frozenset(
    {
        "copy_",
        "fill_",
        "zero_",
        "index_copy_",
        "index_put_",
        "index_fill_",
        "masked_scatter_",
        "masked_fill_",
        "scatter_",
        "normal_",
        "uniform_",
        "random_",
        "add_",
        "mul_",
        "set_",
        "resize_",
    }
)
_REALLOCATORS = frozenset({"resize_", "set_", "resize_as_"})


def key_of(node: ast.AST) -> str | None:
    """`static_x`, `self.static_x`, `self.outputs[]`: a stable key for a name, attribute or slot."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = key_of(node.value)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Subscript):
        base = key_of(node.value)
        return f"{base}[]" if base else None
    return None


def _root_key(node: ast.AST) -> str | None:
    """The storage a view expression belongs to: `static_in[:n]` -> `static_in`."""
    while True:
        if isinstance(node, ast.Subscript):
            inner = key_of(node)
            base = key_of(node.value)
            if base is not None:
                return inner  # a slot (`outputs[bs]`) or a slice (`x[:n]`): resolved by the caller
            node = node.value
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _ALIASING_METHODS
        ):
            node = node.func.value
        elif isinstance(node, ast.Attribute) and node.attr in _ALIASING_ATTRS:
            node = node.value
        else:
            return key_of(node)


@dataclass
class Capture:
    graph: str
    line: int
    end_line: int
    function: str  # qualname of the function holding the capture
    inputs: set[str] = field(default_factory=set)
    outputs: set[str] = field(default_factory=set)


def graph_key(node: ast.AST | None) -> str | None:
    return key_of(node) if node is not None else None


def note_capture(walker: FunctionWalker, body: list[ast.stmt], graph: ast.AST | None, line: int, end_line: int) -> None:
    """Record a capture's graph, static inputs and static outputs (types as of capture time)."""
    key = graph_key(graph)
    if key is None:
        return
    capture = Capture(key, line, end_line, walker.qualname)
    assigned: set[str] = set()
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for element in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                        element_key = key_of(element)
                        if element_key:
                            capture.outputs.add(element_key)
                            assigned.add(element_key)
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                node_key = key_of(node)
                if node_key is None or node_key in assigned:
                    continue
                ty = walker.ty(node)
                if ty is not None and ty.tensorish:
                    capture.inputs.add(node_key)
    walker.st.captures.append(capture)


@dataclass
class _Kept:
    node: ast.AST
    graph: str
    replays_at: int
    container: bool
    fix: Fix | None


class ReplayFlow:
    """The statement-order pass over one function that can see some captures."""

    def __init__(self, walker: FunctionWalker, captures: list[Capture], returns_static: dict[str, str]) -> None:
        self.w = walker
        self.captures = captures
        self.returns_static = returns_static  # same-file functions that replay and return an output
        self.graph_alias: dict[str, str] = {c.graph: c.graph for c in captures}
        self.outputs: dict[str, str] = {}  # output key -> graph
        self.inputs: dict[str, str] = {}
        for capture in captures:
            for key in capture.outputs:
                self.outputs.setdefault(key, capture.graph)
            for key in capture.inputs:
                self.inputs.setdefault(key, capture.graph)
        self.replays: dict[str, int] = {}
        self.kept: dict[str, _Kept] = {}
        self.rebinds: dict[str, list[tuple[ast.AST, str, ast.AST]]] = {}
        self.reported: set[tuple[str, int, int]] = set()
        self.loop_depth = 0
        self.loop_replays: list[set[str]] = []
        self.returns_output: str | None = None

    # -- reporting -----------------------------------------------------------------------
    def report(self, code: str, node: ast.AST, message: str, fix: Fix | None = None) -> None:
        key = (code, node.lineno, node.col_offset)
        if key in self.reported:
            return
        self.reported.add(key)
        self.w.hazard(code, node, message, fix=fix, always=True)

    # -- classification --------------------------------------------------------------------
    def static_output_graph(self, value: ast.AST) -> str | None:
        """Graph whose static output ``value`` aliases (itself, a view, a kept alias)."""
        node = value
        while True:
            key = key_of(node)
            if key is not None:
                if key in self.outputs:
                    return self.outputs[key]
                if key in self.kept and not self.kept[key].container:
                    return self.kept[key].graph
            if isinstance(node, ast.Subscript):
                node = node.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _ALIASING_METHODS
            ):
                node = node.func.value
            elif isinstance(node, ast.Attribute) and node.attr in _ALIASING_ATTRS:
                node = node.value
            elif isinstance(node, ast.Call):
                return self._static_call(node)
            else:
                return None

    def replay_of(self, call: ast.Call) -> str | None:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "replay":
            key = key_of(func.value)
            if key is not None:
                return self.graph_alias.get(key) or (key if key in self.graph_alias.values() else None)
        return None

    # -- walk ----------------------------------------------------------------------------
    def run(self, body: list[ast.stmt]) -> None:
        self.block(body)

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            self.loop(stmt)
            return
        if isinstance(stmt, ast.If):
            self.reads(stmt.test)
            self.block(stmt.body)
            self.block(stmt.orelse)
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.reads(item.context_expr)
            self.block(stmt.body)
            return
        if isinstance(stmt, ast.Try):
            self.block(stmt.body)
            for handler in stmt.handlers:
                self.block(handler.body)
            self.block(stmt.orelse)
            self.block(stmt.finalbody)
            return
        if isinstance(stmt, ast.Assign):
            self.reads(stmt.value)
            for target in stmt.targets:
                self.assign(target, stmt.value, stmt)
            return
        if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.reads(stmt.value)
            self.assign(stmt.target, stmt.value, stmt)
            return
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            self.reads(stmt.value)
            graph = self.static_output_graph(stmt.value)
            if graph is not None and self.replays.get(graph):
                self.returns_output = graph
            return
        if isinstance(stmt, ast.Expr):
            value = stmt.value
            if isinstance(value, (ast.Yield, ast.YieldFrom)) and value.value is not None:
                self.reads(value.value)
                graph = self.static_output_graph(value.value)
                if graph is not None and self.loop_depth and any(graph in r for r in self.loop_replays):
                    self.report(
                        "GL201",
                        value.value,
                        f"static output `{source_text(value.value)}` of graph `{graph}` is yielded from a replay "
                        "loop: the consumer's reference is overwritten by the next replay",
                        _clone_fix(self.w.st, value.value),
                    )
                return
            self.reads(value)
            return
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                self.reads(child)

    def loop(self, stmt: ast.For | ast.AsyncFor | ast.While) -> None:
        if isinstance(stmt, ast.While):
            self.reads(stmt.test)
        else:
            self.reads(stmt.iter)
        replays_here = {g for g in (self._replays_in(stmt.body))}
        self.loop_depth += 1
        self.loop_replays.append(replays_here)
        if replays_here:
            self._check_inputs_updated(stmt, replays_here)
        for _ in range(2):  # iteration k, then k+1 after it
            if not isinstance(stmt, ast.While):
                self.kill(stmt.target)
            self.block(stmt.body)
        self.loop_replays.pop()
        self.loop_depth -= 1
        self.block(stmt.orelse)

    def _replays_in(self, body: list[ast.stmt]) -> set[str]:
        found = set()
        for stmt in body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Call):
                    graph = self.replay_of(node) or self._static_call(node)
                    if graph is not None:
                        found.add(graph)
        return found

    # -- expressions -----------------------------------------------------------------------
    def reads(self, expr: ast.AST) -> None:
        """Calls (replays, input writes, appends) and reads of kept names, in evaluation order."""
        for node in evaluation_order(expr):
            if isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                self.read_key(node.id, node)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                key = key_of(node)
                if key is not None and key in self.kept:
                    self.read_key(key, node)

    def read_key(self, key: str, node: ast.AST) -> None:
        kept = self.kept.get(key)
        if kept is None:
            return
        if self.replays.get(kept.graph, 0) > kept.replays_at:
            self.report(
                "GL201",
                kept.node,
                f"`{source_text(kept.node)}` keeps a static output of graph `{kept.graph}` that a later replay "
                f"overwrites before it is read (line {node.lineno})",
                kept.fix,
            )

    def call(self, call: ast.Call) -> None:
        graph = self.replay_of(call)
        if graph is not None:
            self.replays[graph] = self.replays.get(graph, 0) + 1
            for node, name, value in self.rebinds.pop(graph, []):
                self.report(
                    "GL202",
                    node,
                    f"static input `{name}` of graph `{graph}` is rebound before `replay()`: the graph keeps "
                    "reading the old buffer",
                    _copy_fix(self.w.st, node, value),
                )
            return
        func = call.func
        if isinstance(func, ast.Attribute):
            method = func.attr
            if method in ("append", "extend", "insert", "add", "appendleft") and call.args:
                value = call.args[-1]
                graph = self.static_output_graph(value)
                if graph is not None:
                    self._keep(key_of(func.value), value, graph, container=True)
            elif method in _REALLOCATORS:
                owner = self._input_owner(func.value)
                if owner is not None:
                    self.report(
                        "GL204",
                        call,
                        f"`{source_text(func.value)}.{method}()` reallocates a static input of graph `{owner}`: the "
                        "graph keeps its old address",
                    )
        graph = self._static_call(call)
        if graph is not None:
            self.replays[graph] = self.replays.get(graph, 0) + 1

    def _input_owner(self, node: ast.AST) -> str | None:
        key = _root_key(node)
        if key is None:
            return None
        if key in self.inputs:
            return self.inputs[key]
        base = key.split("[", 1)[0]
        return self.inputs.get(base)

    def _keep(self, holder: str | None, value: ast.AST, graph: str, container: bool) -> None:
        if holder is None:
            return
        in_replay_loop = self.loop_depth and any(graph in r for r in self.loop_replays)
        fix = _clone_fix(self.w.st, value)
        if container and in_replay_loop:
            self.report(
                "GL201",
                value,
                f"static output `{source_text(value)}` of graph `{graph}` is stored in `{holder}` inside a replay "
                "loop: every element ends up holding the last replay's values",
                fix,
            )
            return
        self.kept[holder] = _Kept(value, graph, self.replays.get(graph, 0), container, fix)

    def assign(self, target: ast.expr, value: ast.expr, stmt: ast.stmt) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.kill(element)
            return
        key = key_of(target)
        if key is None:
            return
        # A graph stored under another name: `self.graphs[bs] = graph`.
        value_key = key_of(value)
        if value_key is not None and value_key in self.graph_alias:
            self.graph_alias[key] = self.graph_alias[value_key]
        # GL204: `static_x.data = ...`
        if isinstance(target, ast.Attribute) and target.attr == "data":
            owner = self._input_owner(target.value)
            if owner is not None:
                self.report(
                    "GL204",
                    target,
                    f"`{key} = ...` swaps the storage of a static input of graph `{owner}`: the graph keeps its old "
                    "address",
                )
                return
        # GL202: rebinding a static input after its capture.
        if key in self.inputs and stmt.lineno > self._capture_end(self.inputs[key]) and not _is_allocation(value):
            self.rebinds.setdefault(self.inputs[key], []).append((stmt, key, value))
        graph = self.static_output_graph(value)
        if key in self.outputs and graph is None:
            self.kill(target)
            return
        if graph is not None and key not in self.outputs:
            if key.startswith("self.") and not self.replays.get(graph) and not self.loop_depth:
                # `self.output_buffers["hidden"] = hidden` right after the capture: the class
                # now holds the static output under another name, for every method to see.
                self._publish_output(key, graph)
                return
            container = isinstance(target, ast.Subscript) or "." in key
            self._keep(key, value, graph, container)
            return
        self.kill(target)

    def _publish_output(self, key: str, graph: str) -> None:
        self.outputs[key] = graph
        for capture in self.captures:
            if capture.graph == graph:
                capture.outputs.add(key)

    def _static_call(self, value: ast.AST) -> str | None:
        """The graph a call replays when its result is a static output: a runner defined in
        this file, a make_graphed_callables result, a cudagraph-mode torch.compile result."""
        if isinstance(value, ast.Call):
            target = self.w._call_target(value)
            if target is not None and target in self.returns_static:
                return self.returns_static[target]
            callee = self.w.ty(value.func)
            if callee is not None and callee.kind == T.GRAPHED:
                return f"{source_text(value.func)} (graphed)"
        return None

    def kill(self, target: ast.AST) -> None:
        for node in ast.walk(target):
            key = key_of(node)
            if key is not None:
                self.kept.pop(key, None)

    def _capture_end(self, graph: str) -> int:
        lines = [c.end_line for c in self.captures if c.graph == graph and c.function == self.w.qualname]
        return max(lines) if lines else 0

    # -- GL203 ---------------------------------------------------------------------------
    def _check_inputs_updated(self, loop: ast.For | ast.AsyncFor | ast.While, graphs: set[str]) -> None:
        fresh = set()
        if not isinstance(loop, ast.While) and not _is_counter(loop.iter):
            fresh |= {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name) and not n.id.startswith("_")}
        for stmt in loop.body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _is_next(node.value):
                    for target in node.targets:
                        fresh |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        if not fresh:
            return
        for graph in sorted(graphs):
            inputs = {k for k, g in self.inputs.items() if g == graph}
            if not inputs:
                continue
            replay = None
            reached = False
            derived = set(fresh)
            for stmt in loop.body:
                replay = replay or _first_replay(stmt, self, graph)
                if replay is not None and not _contains(stmt, replay):
                    break
                for node in ast.walk(stmt):
                    if replay is not None and node is replay:
                        break
                    if isinstance(node, ast.Assign):
                        if _mentions(node.value, derived):
                            for target in node.targets:
                                target_key = key_of(target)
                                root = _root_key(target)
                                if target_key in inputs or (root and root.split("[", 1)[0] in inputs):
                                    reached = True
                                derived |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
                    elif isinstance(node, ast.Call) and _mentions(node, derived):
                        func = node.func
                        if isinstance(func, ast.Attribute) and func.attr in _INPUT_WRITERS:
                            if self._input_owner(func.value) == graph:
                                reached = True
                        elif self._passes_to_unknown_code(node, derived):
                            reached = True  # a helper may copy it in: do not guess
                if replay is not None:
                    break
            if replay is not None and not reached:
                self.report(
                    "GL203",
                    replay,
                    f"`{source_text(replay.func)}()` replays on stale inputs: the loop's fresh data "
                    f"({', '.join(sorted(fresh))}) never reaches a static input of graph `{graph}`",
                )

    def _passes_to_unknown_code(self, call: ast.Call, derived: set[str]) -> bool:
        name = self.w.resolve(call.func)
        if name is not None and name.startswith(("torch.", "print", "len", "range", "enumerate", "zip", "isinstance")):
            return False
        if isinstance(call.func, ast.Attribute):
            receiver = self.w.ty(call.func.value)
            if receiver is not None and receiver.kind in T.TENSORISH:
                return False
        return any(_mentions(arg, derived) for arg in [*call.args, *(kw.value for kw in call.keywords)])


def _first_replay(stmt: ast.stmt, flow: ReplayFlow, graph: str) -> ast.Call | None:
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and flow.replay_of(node) == graph:
            return node
    return None


def _contains(stmt: ast.AST, target: ast.AST) -> bool:
    return any(node is target for node in ast.walk(stmt))


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _is_counter(iterable: ast.AST) -> bool:
    """`range(n)`, `itertools.count()`: iteration numbers, not data."""
    if isinstance(iterable, ast.Call):
        name = source_text(iterable.func)
        return name in ("range", "itertools.count", "count", "itertools.repeat", "repeat")
    return False


def _is_next(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == "next"


def _is_allocation(value: ast.AST) -> bool:
    """`static_x = torch.zeros(...)` before a new capture is a fresh buffer, not a rebinding."""
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in ("zeros", "ones", "empty", "full", "randn", "rand", "zeros_like", "empty_like", "ones_like")
    return False


def _clone_fix(state: ModuleState, value: ast.AST) -> Fix | None:
    """Append `.clone()` to the kept expression (safe: a copy never changes what is computed)."""
    if not isinstance(value, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
        return None
    return Fix("safe", f"keep a copy: `{source_text(value)}.clone()`", (AppendMethodCall(state.span(value), "clone"),))


def _copy_fix(state: ModuleState, stmt: ast.AST, value: ast.AST) -> Fix | None:
    """`static_x = batch` -> `static_x.copy_(batch)` (unsafe: the shapes may differ)."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return None
    new = f"{source_text(stmt.targets[0])}.copy_({source_text(value)})"
    return Fix(
        "unsafe", f"copy into the static input: `{new}` (shapes must match)", (ReplaceAssignWithCopy(state.span(stmt)),)
    )


def analyze(state: ModuleState, source: str = "") -> None:
    """Run the flow pass over every function that can see a capture of this file.

    Two rounds: the first finds the functions that replay and return a static output
    (runners), the second reports, treating calls of those runners as replays.
    """
    for walker in state.walkers:
        record_trace(walker)
    if not state.captures and not any(walker.graphed_calls for walker in state.walkers) and ".replay()" not in source:
        return
    by_function: dict[str, list[Capture]] = {}
    for capture in state.captures:
        by_function.setdefault(capture.function, []).append(capture)
    returns_static: dict[str, str] = {}
    for round_number in range(2):
        final = round_number == 1
        for walker in state.walkers:
            visible = _visible_captures(walker, by_function)
            if not visible and not returns_static and not walker.graphed_calls:
                continue
            walker._ty_cache.clear()
            before = len(walker.summary.hazards)
            flow = ReplayFlow(walker, visible, returns_static)
            flow.run(walker.node.body if hasattr(walker.node, "body") else [])
            if flow.returns_output is not None:
                for target in _self_targets(walker):
                    returns_static[target] = flow.returns_output
                walker.summary.returns_static = flow.returns_output
            if not final:
                del walker.summary.hazards[before:]


def _self_targets(walker: FunctionWalker) -> list[str]:
    """The call targets (see `CallRef`) that run this function."""
    if walker.class_qualname:
        method = walker.qualname.rsplit(".", 1)[-1]
        targets = [f"m:{walker.class_qualname}:{method}"]
        if method in ("__call__", "forward"):
            targets.append(f"i:{walker.class_qualname}")
        return targets
    return [f"f:{walker.qualname}"]


def _conventional_captures(walker: FunctionWalker) -> list[Capture]:
    """A function that replays a graph captured elsewhere (passed in, built by a helper):
    its buffers are recognised by PyTorch's documented naming, `static_*`. Those written in
    place (`static_input.copy_(data)`) or rebound are inputs; the others it reads are outputs.
    Only used when no capture of the graph is visible."""
    body = walker.node.body if hasattr(walker.node, "body") else []
    graphs: set[str] = set()
    names: set[str] = set()
    written: set[str] = set()
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "replay" and not node.args:
                    graph = key_of(node.func.value)
                    if graph is not None:
                        graphs.add(graph)
                elif node.func.attr in _INPUT_WRITERS:
                    root = _root_key(node.func.value)
                    if root is not None:
                        written.add(root.split("[", 1)[0])
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    root = _root_key(target)
                    if root is not None:
                        written.add(root.split("[", 1)[0])
            key = key_of(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if key is not None and key.rsplit(".", 1)[-1].startswith("static_"):
                names.add(key)
    if len(graphs) != 1 or not names:
        return []
    capture = Capture(graphs.pop(), 0, 0, walker.qualname)
    capture.inputs = {n for n in names if n in written}
    capture.outputs = names - capture.inputs
    return [capture]


def _visible_captures(walker: FunctionWalker, by_function: dict[str, list[Capture]]) -> list[Capture]:
    visible = list(by_function.get(walker.qualname, []))
    for function, captures in by_function.items():
        if function == walker.qualname:
            continue
        for capture in captures:
            shared_self = walker.class_qualname and function.startswith(walker.class_qualname + ".")
            if capture.graph.startswith("self.") and shared_self:
                visible.append(capture)
            elif not capture.graph.startswith("self.") and function.endswith(".<module>"):
                visible.append(capture)  # module-level graphs and buffers, used from functions
    if not visible:
        visible = _conventional_captures(walker)
    return visible


# -- Cross-file runners -------------------------------------------------------------------
# A runner method in one file replays its graph and returns its static output; a caller in
# another file keeps the result across a second call. The file phase cannot know the callee
# is a runner, so it records a small trace of the calls whose results are kept, and the
# project phase replays that trace once every function's `returns_static` is known.


def record_trace(walker: FunctionWalker) -> None:
    body = walker.node.body if hasattr(walker.node, "body") else []
    bound: dict[str, int] = {}
    in_loop = False
    for stmt in _plain_statements(body):
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            target = walker._call_target(stmt.value)
            if target is not None:
                bound[target] = bound.get(target, 0) + 1
    if not bound:
        return
    events = _trace_block(walker, body, set(bound))
    in_loop = any(e[0] == "loop" for e in events)
    if in_loop or max(bound.values()) > 1:
        walker.summary.trace = events


def _plain_statements(body: list[ast.stmt]):
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, name, None)
            if isinstance(block, list):
                yield from _plain_statements(block)
        for handler in getattr(stmt, "handlers", ()):
            yield from _plain_statements(handler.body)


def _trace_block(walker: FunctionWalker, body: list[ast.stmt], targets: set[str]) -> list[tuple]:
    events: list[tuple] = []
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            events.extend(_trace_reads(walker, stmt.test if isinstance(stmt, ast.While) else stmt.iter, targets))
            events.append(("loop", tuple(_trace_block(walker, stmt.body, targets))))
            continue
        if isinstance(stmt, (ast.If, ast.With, ast.AsyncWith, ast.Try)):
            header = stmt.test if isinstance(stmt, ast.If) else None
            if header is not None:
                events.extend(_trace_reads(walker, header, targets))
            for name in ("body", "orelse", "finalbody"):
                events.extend(_trace_block(walker, getattr(stmt, name, []) or [], targets))
            for handler in getattr(stmt, "handlers", ()):
                events.extend(_trace_block(walker, handler.body, targets))
            continue
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = stmt.value
            target = walker._call_target(value) if isinstance(value, ast.Call) else None
            if target in targets:
                for arg in [*value.args, *(kw.value for kw in value.keywords)]:
                    events.extend(_trace_reads(walker, arg, targets))
                events.append(
                    (
                        "bind",
                        target,
                        stmt.targets[0].id,
                        *_trace_span(walker, value),
                    )
                )
                continue
            events.extend(_trace_reads(walker, value, targets))
            events.append(("kill", stmt.targets[0].id))
            continue
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                events.extend(_trace_reads(walker, child, targets))
            elif isinstance(child, ast.Name):
                events.append(("kill", child.id))
    return events


def _trace_reads(walker: FunctionWalker, expr: ast.AST, targets: set[str]) -> list[tuple]:
    events: list[tuple] = []
    for node in evaluation_order(expr):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            events.append(("read", node.id, node.lineno))
        elif isinstance(node, ast.Call):
            target = walker._call_target(node)
            if target in targets:
                events.append(("call", target))
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("append", "extend", "insert") and node.args:
                arg = node.args[-1]
                if isinstance(arg, ast.Name):
                    events.append(("store", arg.id, *_trace_span(walker, arg)))
    return events


def _trace_span(walker: FunctionWalker, node: ast.AST) -> tuple[int, int, int, int]:
    """A node's span in a trace: 0-based columns in characters, like the findings' (ast counts bytes)."""
    line, col, end_line, end_col = walker.st.span(node)
    return line, col - 1, end_line, end_col - 1


def evaluate_trace(trace: list[tuple], runner_graph) -> list[tuple[int, int, int, int, str, bool]]:
    """Replay a recorded trace; ``runner_graph(target)`` names the graph a runner call replays.

    Returns (line, col, end_line, end_col, message, fixable) for each GL201 (0-based columns).
    """
    replays: dict[str, int] = {}
    kept: dict[str, tuple] = {}
    found: dict[tuple[int, int], tuple] = {}

    def run(events: tuple | list, loop_graphs: set[str]) -> None:
        for event in events:
            kind = event[0]
            if kind == "loop":
                inner = _trace_graphs(event[1], runner_graph)
                for _ in range(2):
                    run(event[1], loop_graphs | inner)
            elif kind == "call":
                graph = runner_graph(event[1])
                if graph is not None:
                    replays[graph] = replays.get(graph, 0) + 1
            elif kind == "bind":
                _, target, name, line, col, end_line, end_col = event
                graph = runner_graph(target)
                if graph is None:
                    kept.pop(name, None)
                    continue
                replays[graph] = replays.get(graph, 0) + 1
                kept[name] = (graph, replays[graph], (line, col, end_line, end_col))
            elif kind == "read":
                entry = kept.get(event[1])
                if entry is not None and replays.get(entry[0], 0) > entry[1]:
                    line, col, end_line, end_col = entry[2]
                    found.setdefault(
                        (line, col),
                        (
                            line,
                            col,
                            end_line,
                            end_col,
                            f"the result of this call is a static output of graph `{entry[0]}`, kept in "
                            f"`{event[1]}` and read on line {event[2]} after a later call overwrote it",
                            True,
                        ),
                    )
            elif kind == "store":
                entry = kept.get(event[1])
                if entry is not None and entry[0] in loop_graphs:
                    _, name, line, col, end_line, end_col = event
                    found.setdefault(
                        (line, col),
                        (
                            line,
                            col,
                            end_line,
                            end_col,
                            f"`{name}` is a static output of graph `{entry[0]}` stored in a container inside a loop "
                            "that calls the runner again: every element ends up holding the last call's values",
                            True,
                        ),
                    )
            elif kind == "kill":
                kept.pop(event[1], None)

    run(trace, set())
    return [found[key] for key in sorted(found)]


def _trace_graphs(events: tuple, runner_graph) -> set[str]:
    graphs = set()
    for event in events:
        if event[0] in ("call", "bind"):
            graph = runner_graph(event[1])
            if graph is not None:
                graphs.add(graph)
        elif event[0] == "loop":
            graphs |= _trace_graphs(event[1], runner_graph)
    return graphs
