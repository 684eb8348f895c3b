"""What every walker of one file shares: the tree, imports, definitions, class knowledge,
positions, and the enabled rules' hooks."""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.call_targets import CallTarget
from graphlint.checkers.machinery.core.capture_state import guard_calls, stream_capture_calls
from graphlint.checkers.machinery.core.model import FunctionSummary, ModuleSummary
from graphlint.checkers.machinery.core.names import ImportMap, canonical
from graphlint.checkers.machinery.core.syntax import Located
from graphlint.checkers.machinery.detectors import Hooks

_BUILTINS = frozenset(dir(builtins))


@dataclass
class Capture:
    """One capture the binder found: its graph, and its static inputs and outputs (the replay flow's)."""

    graph: str
    line: int
    end_line: int
    function: str  # qualname of the function holding the capture
    inputs: set[str] = field(default_factory=set)
    outputs: set[str] = field(default_factory=set)
    # Names and attributes read in it whose kind nothing says: inputs for all the flow knows.
    # None: the capture's body is not visible (a graph captured elsewhere), any may be one.
    unknown_reads: set[str] | None = field(default_factory=set)


def _names_no_member(walker: Binder, node: ast.AST) -> str | None:
    return None


def _is_no_factory(name: str) -> bool:
    return False


def _records_nothing(walker: Binder, body: list[ast.stmt], graph: ast.AST | None, line: int, end_line: int) -> None:
    return None


@dataclass(frozen=True)
class FlowHooks:
    """What the flows lend the binder, which must not import them: the stream flow knows which
    `torch.cuda` operation a device module's attribute is (`get_accelerator().stream`) and which
    calls return a device module; the replay flow records a capture's static inputs and outputs
    while the binder still knows the types at capture time. The file phase (`summarize`) wires
    the flows in; a walker built with the defaults knows none of it."""

    device_module_member: Callable[[Binder, ast.AST], str | None] = _names_no_member
    is_device_module_factory: Callable[[str], bool] = _is_no_factory
    note_capture: Callable[[Binder, list[ast.stmt], ast.AST | None, int, int], None] = _records_nothing


class Binder(Protocol):
    """A function's binder as the flows see it (`binder.FunctionWalker` is the one there is).

    The flows are states the binder's function is walked with again; they ask it what values
    are and where findings go, and must not import the binder (which runs them).
    """

    st: ModuleState
    qualname: str
    display: str
    class_qualname: str | None
    node: ast.AST
    is_module: bool
    globals: set[str]
    locals: set[str]
    summary: FunctionSummary
    regions: tuple[int, ...]
    graphed_calls: int  # calls so far of make_graphed_callables results
    graph_context_names: set[str]  # locals bound to a graph capture context (capture_values)

    @property
    def body(self) -> list[ast.stmt]: ...

    def ty(self, node: ast.AST | None) -> T.Ty | None: ...

    def resolve(self, node: ast.AST) -> str | None: ...

    def lookup(self, name: str) -> T.Ty | None: ...

    def call_target(self, call: ast.Call) -> CallTarget | None: ...

    def chain(self) -> Iterator[Binder]: ...

    def emit(self, event: object) -> None: ...

    def forget_kinds(self) -> None: ...

    def is_local_name(self, name: str) -> bool: ...

    def is_stream_context(self, call: ast.Call) -> bool: ...

    def capturing_guard(self, test: ast.expr) -> bool | None: ...

    def non_cuda_branch(self, test: ast.expr, index: int) -> bool: ...


class ModuleState:
    """What every function walker of one file shares: imports, definitions, class knowledge."""

    def __init__(
        self, tree: ast.Module, module: str, is_package: bool, lines: list[str], hooks: Hooks, flow_hooks: FlowHooks
    ) -> None:
        self.tree = tree
        self.hooks = hooks
        self.flow_hooks = flow_hooks
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
        self.captures: list[Capture] = []
        self.walkers: list[Binder] = []
        self.calls_by_span: dict[tuple[int, int, int, int], ast.Call] = {}  # optimizer constructors
        self.side_stream_attributes: dict[str, dict[str, str]] = {}  # class -> attr -> stream (stream flow)
        self.side_written_attributes: dict[str, dict[str, Any]] = {}  # class -> attr -> where (attribute_escapes)
        self.current_stream_attributes: dict[str, frozenset[str]] = {}  # class -> attrs set from current_stream()
        self.stream_effects: dict[str, object] = {}  # memoised function summaries (stream_effects)
        self.graph_context_attrs: set[tuple[str, str]] = set()  # (class, attr) bound to a graph context
        # call -> its value while capturing (capture_state): as a branch's guard, and in every stream capture
        self.guard_calls: dict[str, bool] = guard_calls({})
        self.stream_calls: dict[str, bool] = stream_capture_calls({})

    # -- positions ---------------------------------------------------------------------
    def column(self, line: int, byte_offset: int) -> int:
        """ast columns count UTF-8 bytes; findings count characters, 1-based."""
        if 1 <= line <= len(self.lines):
            text = self.lines[line - 1]
            if not text.isascii():
                return len(text.encode("utf-8")[:byte_offset].decode("utf-8", "replace")) + 1
        return byte_offset + 1

    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        """Where ``node`` is. Every node a finding, call or region points at has a position (an
        expression, a statement, an argument), which `ast.AST`'s type does not say."""
        at = cast(Located, node)
        line = at.lineno
        end_line = at.end_lineno or line
        return (
            line,
            self.column(line, at.col_offset),
            end_line,
            self.column(end_line, at.end_col_offset if at.end_col_offset is not None else at.col_offset),
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
