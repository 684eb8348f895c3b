"""A static input kept in a graph's record, refilled before the replay on some paths only.

Servers that capture one decode graph per batch size keep each graph with its static inputs in
a record: `self.cuda_graphs[bs] = {"input_ids": input_ids, "block_tables": block_tables, ...}`,
built in the method that captures, read back in the method that replays
(`cuda_graph = self.cuda_graphs[bs]`, `cuda_graph["input_ids"][:n] = input_ids`,
`cuda_graph["graph"].replay()`). When one input is refilled only under a condition (an attention
backend, a feature flag) that the capture did not share, the replays on the other path read
what an earlier call left in that buffer. TGI did this with `block_tables`, refilled only for
the flashinfer backend.

The test is narrow, and stays local to one class:

- the record is a dict literal stored under the holder the replaying method reads it from, in a
  method of the same class that captures, and the captured block reads the input's name;
- the replaying method refills at least one of that record's inputs on every path to the replay
  (the refill protocol is there), and refills this one only inside one arm of an `if` that does
  not also hold the replay. Refills in both arms, and a condition that tests the record or the
  input itself, do not count;
- the capture did not read the name under the same condition.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from graphlint.checkers.machinery.core.branch_arms import Arm, arms_around
from graphlint.checkers.machinery.core.names import dotted_parts, source_text
from graphlint.checkers.machinery.core.syntax import statements, walk_no_defs
from graphlint.checkers.machinery.flows.replay.derived_inputs import loaded_names
from graphlint.checkers.machinery.flows.replay.kept_state import is_capture_call

# In-place methods that put new data into a buffer (a fill or zero_ resets it; it does not refill).
_REFILLING = frozenset({"copy_", "index_copy_", "index_put_", "masked_scatter_", "scatter_"})


@dataclass(frozen=True)
class ConditionalRefill:
    """``key`` of ``record`` is refilled by ``refill`` only in arm ``field`` of ``branch``."""

    record: str  # the local name the replaying method holds the record in
    key: str
    refill: ast.stmt
    branch: ast.If
    field: str  # "body" or "orelse"
    others: tuple[str, ...]  # inputs of the same record refilled on every path


def conditional_refills(function: ast.AST, replay: ast.Call, cls: ast.ClassDef) -> list[ConditionalRefill]:
    """The record inputs ``function`` refills before ``replay`` on some paths only."""
    record = _record_name(replay)
    body = getattr(function, "body", [])
    holders = _holders(function, record) if record else set()
    captured = _RecordCaptures(cls, holders) if holders else None
    around = [s for s in statements(body) if any(n is replay for n in ast.walk(s))]
    replay_stmt = around[-1] if around else None  # the innermost: statements() gives outer ones first
    if captured is None or not captured.inputs or record is None or replay_stmt is None:
        return []
    inputs = captured.inputs
    shared = set(_arms(body, replay_stmt))
    refills = _refills(body, record, replay.lineno)
    conditions = {
        key: [[a for a in _arms(body, s) if a not in shared] for s in found] for key, found in refills.items()
    }
    always = tuple(key for key in refills if key in inputs and any(not arms for arms in conditions[key]))
    found = []
    for key, arms_per_refill in conditions.items():
        if key not in inputs or key in always or not always:
            continue
        outer = {arms[0] for arms in arms_per_refill}
        branch, field = next(iter(outer))
        if len(outer) > 1 or not isinstance(branch, ast.If) or _names_in(branch.test) & {record, key, inputs[key]}:
            continue
        if source_text(branch.test) in captured.conditions(inputs[key]):
            continue
        found.append(ConditionalRefill(record, key, refills[key][0], branch, field, always))
    return found


def _record_name(replay: ast.Call) -> str | None:
    """`cuda_graph` from `cuda_graph["graph"].replay()`."""
    func = replay.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Subscript):
        holder = func.value.value
        return holder.id if isinstance(holder, ast.Name) else None
    return None


def _holders(function: ast.AST, record: str) -> set[str]:
    """The attribute chains the record is read from: `self.cuda_graphs` in
    `cuda_graph = self.cuda_graphs[bs]`."""
    found = set()
    for node in walk_no_defs(function):
        if isinstance(node, ast.Assign) and [_name(t) for t in node.targets] == [record]:
            if isinstance(node.value, ast.Subscript) and (chain := _chain(node.value.value)):
                found.add(chain)
    return found


class _RecordCaptures:
    """One reading of the class's methods that store a record under one of ``holders`` and
    capture: ``inputs``, record key -> the name it holds, for the names the capture reads, and
    the tests of the `if`s around those captures or inside them (`conditions`)."""

    def __init__(self, cls: ast.ClassDef, holders: set[str]) -> None:
        self.inputs: dict[str, str] = {}
        self._around: set[str] = set()
        self._inside: list[ast.If] = []
        for method in _methods(cls):
            records = _records(method, holders)
            if records:
                self._read(method, records)

    def conditions(self, name: str) -> set[str]:
        """The tests around such a capture, and those inside it around a read of ``name``: a
        refill under one of them follows the capture's own choice."""
        return self._around | {source_text(s.test) for s in self._inside if name in _names_in(s)}

    def _read(self, method: ast.FunctionDef | ast.AsyncFunctionDef, records: list[ast.Dict]) -> None:
        blocks = _captures(method)
        read = {n.id for block in blocks for n in loaded_names(block)}
        for block in blocks:
            self._around.update(source_text(s.test) for s, _ in _arms(method.body, block) if isinstance(s, ast.If))
            self._inside.extend(node for node in walk_no_defs(block) if isinstance(node, ast.If))
        for record in records:
            for key, value in zip(record.keys, record.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(value, ast.Name):
                    if value.id in read:
                        self.inputs[key.value] = value.id


def _records(method: ast.AST, holders: set[str]) -> list[ast.Dict]:
    """The dict literals `holder[key] = {...}` stores."""
    return [
        node.value
        for node in walk_no_defs(method)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Dict)
        and any(isinstance(t, ast.Subscript) and _chain(t.value) in holders for t in node.targets)
    ]


def _refills(body: list[ast.stmt], record: str, before: int) -> dict[str, list[ast.stmt]]:
    """Key -> the statements before line ``before`` that put data into `record[key]`."""
    found: dict[str, list[ast.stmt]] = {}
    for stmt in statements(body):
        if stmt.lineno >= before:
            continue
        key = _refilled_key(stmt, record)
        if key is not None:
            found.setdefault(key, []).append(stmt)
    return found


def _refilled_key(stmt: ast.stmt, record: str) -> str | None:
    """`record["k"][...] = v` and `record["k"].copy_(v)` refill "k"."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript):
        return _key_of(stmt.targets[0].value, record)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr in _REFILLING:
            return _key_of(func.value, record)
    return None


def _key_of(node: ast.expr, record: str) -> str | None:
    if isinstance(node, ast.Subscript) and _name(node.value) == record:
        key = node.slice
        return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
    return None


def _arms(body: list[ast.stmt], target: ast.stmt) -> tuple[Arm, ...]:
    return arms_around(body, target) or ()


def _captures(method: ast.AST) -> list[ast.With]:
    return [
        node
        for node in walk_no_defs(method)
        if isinstance(node, ast.With)
        and any(isinstance(item.context_expr, ast.Call) and is_capture_call(item.context_expr) for item in node.items)
    ]


def _methods(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in cls.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def _name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _chain(node: ast.expr) -> str | None:
    parts = dotted_parts(node) if isinstance(node, (ast.Attribute, ast.Name)) else None
    return ".".join(parts) if parts else None
