"""Attributes that hold host data, across files: `batch.lens_np.max().item()` is no device sync.

A file only types the attributes of its own classes; `batch: InputBatch` from another file
leaves `batch.num_scheduled_tokens` unknown, and `.max()` on an unknown value is taken to be
a tensor (only tensors and NumPy arrays have it). So a host-sync candidate that reads an
attribute of a project class keeps the (class, attribute) it reads, the file of the class
says which of its attributes hold host data (a NumPy annotation or value, a host tensor),
and the project phase drops the candidate when the class holds host data there.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.names import dotted_parts
from graphlint.checkers.machinery.core.syntax import statements, unquoted_annotation

if TYPE_CHECKING:
    from graphlint.checkers.machinery.core.binder import FunctionWalker
    from graphlint.checkers.machinery.core.model import ClassSummary

Resolve = Callable[[ast.AST], "str | None"]

# Methods a NumPy array shares with a tensor that keep the value where it is.
_SHARED_METHODS = T.TENSOR_ONLY_METHODS - {"cuda"}


def is_host_annotation(annotation: ast.expr | None, resolve: Resolve) -> bool:
    """`np.ndarray`, `npt.NDArray[np.int32]`, `np.ndarray | None`, `"np.ndarray"`."""
    annotation = unquoted_annotation(annotation) if annotation is not None else None
    if annotation is None:
        return False
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        parts = [annotation.left, annotation.right]
        values = [p for p in parts if not (isinstance(p, ast.Constant) and p.value is None)]
        return bool(values) and all(is_host_annotation(p, resolve) for p in values)
    if isinstance(annotation, ast.Subscript):
        outer = resolve(annotation.value) or ""
        if outer.endswith("Optional"):
            return is_host_annotation(annotation.slice, resolve)
        annotation = annotation.value
    name = resolve(annotation) if annotation is not None else None
    return name is not None and name.split(".")[0] == "numpy"


def host_attributes(
    node: ast.ClassDef,
    kinds: dict[str, T.Ty],
    methods: Iterable[ast.FunctionDef | ast.AsyncFunctionDef],
    resolve: Resolve,
) -> frozenset[str]:
    """The attributes of a class that hold host data: class-level annotations (a dataclass's
    fields), `self.x: np.ndarray = ...`, `self.x = np.zeros(...)`, and known host tensors."""
    found = {attr for attr, ty in kinds.items() if ty.kind == T.HOST}
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if is_host_annotation(stmt.annotation, resolve):
                found.add(stmt.target.id)
    for method in methods:
        for stmt in statements(method.body):
            for target, annotation, value in _self_assignments(stmt):
                if is_host_annotation(annotation, resolve) or _numpy_call(value, resolve):
                    found.add(target.attr)
    return frozenset(found)


def _self_assignments(stmt: ast.AST) -> Iterator[tuple[ast.Attribute, ast.expr | None, ast.expr | None]]:
    if isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            if _is_self_attribute(target):
                yield target, None, stmt.value  # type: ignore[misc]
    elif isinstance(stmt, ast.AnnAssign) and _is_self_attribute(stmt.target):
        yield stmt.target, stmt.annotation, stmt.value  # type: ignore[misc]


def _is_self_attribute(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _numpy_call(value: ast.expr | None, resolve: Resolve) -> bool:
    if not isinstance(value, ast.Call):
        return False
    name = resolve(value.func)
    return name is not None and name.split(".")[0] == "numpy"


def read_attribute(w: FunctionWalker, receiver: ast.expr) -> tuple[str, str] | None:
    """The (class, attribute) a receiver is computed from: `batch.lens[:n].max()` reads `lens`
    of the class of `batch` (its kind, or the annotation of the parameter it is)."""
    node = receiver
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SHARED_METHODS:
            node = node.func.value
        else:
            break
    if not isinstance(node, ast.Attribute):
        return None
    owner = _class_of(w, node.value)
    return (owner, node.attr) if owner else None


def _class_of(w: FunctionWalker, node: ast.expr) -> str | None:
    ty = w.ty(node)
    if ty is not None and ty.kind == T.INSTANCE and ty.ref:
        return ty.ref
    if ty is not None or not isinstance(node, ast.Name):
        return None
    annotation = w.parameter_annotation(node.id)
    return _annotation_class(annotation, w.resolve) if annotation is not None else None


def _annotation_class(annotation: ast.expr, resolve: Resolve) -> str | None:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return None
    return resolve(annotation) if dotted_parts(annotation) is not None else None


def holds_host_data(chain: Iterator[ClassSummary], attr: str) -> bool:
    """Does the class (or a base along ``chain``) hold host data in ``attr``?"""
    return any(attr in summary.host_attrs for summary in chain)
