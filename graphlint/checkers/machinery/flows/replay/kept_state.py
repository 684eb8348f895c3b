"""A replaying method's returned state object that copies some of a graph's buffers and keeps
another one by reference.

Decoders that run a loop as CUDA graphs (NeMo's label-looping RNN-T computers, streaming
decoders) hand their state back to the caller in a dataclass, built after the replay from the
buffers the graphs write: `State(output=self.state.out.clone(), lm=self.state.lm)`. The caller
keeps that object across calls. Every buffer the next call writes in place changes under it,
so each must be copied; the siblings that are copied show the author meant a snapshot, and the
one that is not is the bug. The test is deliberately narrow (a call that copies one attribute
of an object and passes another attribute of the same object bare, in a method that replays a
graph, of a class that captures one and writes that attribute in place), which is what keeps
it quiet on runners that return their static output by contract.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from graphlint.checkers.machinery.core.names import dotted_parts


@dataclass
class ClassBuffers:
    """What one class does with its `self.a.b` attribute chains: the first line each is written in
    place (`out=`, an in-place method, a subscript store), and whether the class captures a graph."""

    writes: dict[str, int] = field(default_factory=dict)
    captures: bool = False

    def note(self, chain: str, line: int) -> None:
        self.writes[chain] = min(line, self.writes.get(chain, line))


@dataclass
class KeptBuffer:
    node: ast.expr  # the bare attribute passed to the state object
    text: str
    copied_sibling: str  # a sibling of the same object that is copied
    written_line: int


def self_chain(node: ast.AST) -> str | None:
    """`self.state.x` (at least two attributes below `self`), else None."""
    parts = dotted_parts(node) if isinstance(node, ast.Attribute) else None
    return ".".join(parts) if parts and parts[0] == "self" and len(parts) >= 3 else None


def class_buffers(cls: ast.ClassDef) -> ClassBuffers:
    found = ClassBuffers()
    for node in ast.walk(cls):
        if isinstance(node, ast.Call):
            found.captures |= is_capture_call(node)
            for written in _call_writes(node):
                found.note(written, node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                chain = self_chain(target.value) if isinstance(target, ast.Subscript) else None
                if chain:
                    found.note(chain, node.lineno)
    return found


def replays(function: ast.AST) -> bool:
    """Does the function call `<graph>.replay()`?"""
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replay"
        for node in ast.walk(function)
    )


def copies_something(call: ast.Call) -> bool:
    """Is an argument a call named like a copy (`x.clone()`, `clone_states(x)`, `x.copy()`)?"""
    return any(_is_copy_name(_called_name(value)) for value in (*(k.value for k in call.keywords), *call.args))


def bare_beside_copies(call: ast.Call) -> list[tuple[ast.expr, str, str]]:
    """(argument, its chain, a copied sibling) for each bare `self.a.b` argument of ``call`` whose
    object has another attribute copied in the same call: syntax only, so it is cheap to ask first."""
    values = [keyword.value for keyword in call.keywords] + list(call.args)
    copied = {chain: chain.rpartition(".")[0] for chain in map(_copied, values) if chain}
    if not copied:
        return []
    found = []
    for value in values:
        chain = self_chain(value)
        base = chain.rpartition(".")[0] if chain else None
        sibling = next((c for c, b in copied.items() if b == base and c != chain), None)
        if chain and sibling:
            found.append((value, chain, sibling))
    return found


def kept_buffers(candidates: list[tuple[ast.expr, str, str]], buffers: ClassBuffers) -> list[KeptBuffer]:
    """Those of the candidates the class writes in place."""
    return [
        KeptBuffer(value, chain, sibling, buffers.writes[chain])
        for value, chain, sibling in candidates
        if chain in buffers.writes
    ]


def _copied(value: ast.expr) -> str | None:
    """The chain a value copies: `self.a.b.clone()`, `self.a.b.detach().clone()`,
    `clone_states(self.a.b)`, `self.decoder.clone_states(self.a.b)`."""
    name = _called_name(value)
    if not isinstance(value, ast.Call) or not _is_copy_name(name):
        return None
    if isinstance(value.func, ast.Attribute) and name in ("clone", "copy"):
        inner = value.func.value
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "detach":
            inner = inner.func.value
        return self_chain(inner)
    return self_chain(value.args[0]) if value.args else None


def _called_name(value: ast.expr) -> str:
    """The last name of what a call calls (`clone` for `x.clone()`); "" for anything else."""
    func = value.func if isinstance(value, ast.Call) else None
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _is_copy_name(name: str) -> bool:
    return "clone" in name or name == "copy"


def is_capture_call(call: ast.Call) -> bool:
    """`torch.cuda.graph(...)` (any prefix) or `capture_begin(...)`."""
    parts = dotted_parts(call.func) or []
    return parts[-2:] == ["cuda", "graph"] or parts[-1:] == ["capture_begin"]


def _call_writes(call: ast.Call) -> list[str]:
    """The `self.a.b` chains a call writes in place: its `out=`, or its receiver when the method
    is an in-place one (`copy_`, `index_fill_`; on the chain or a subscript of it)."""
    written = [chain for keyword in call.keywords if keyword.arg == "out" and (chain := self_chain(keyword.value))]
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr.endswith("_") and not func.attr.startswith("_"):
        receiver = func.value.value if isinstance(func.value, ast.Subscript) else func.value
        chain = self_chain(receiver)
        if chain:
            written.append(chain)
    return written
