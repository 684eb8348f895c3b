"""GL105 host-state-frozen-in-capture."""

from __future__ import annotations

import ast
import functools
from collections import Counter
from typing import TypeGuard

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.detectors import Detector
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL105",
        preview=True,
        preview_reason=(
            "The labelled finding, from before the 2026-11-29 precision work, was not a hazard (a test model's call counter that only the test's assertions read), and it reports none now: too few findings to vouch for the rule."
        ),
        name="host-state-frozen-in-capture",
        summary=(
            "Calls into `time`, `random` and `numpy.random`, and augmented assignment to Python "
            "state (`self.step += 1`, global counters), in capture."
        ),
        why=(
            "Host code runs once, while capturing. Every replay reuses the value it had then: "
            "the clock never moves, the random draw never changes, the counter stays at one."
        ),
        example="""
            import random

            import torch

            class Noisy(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.calls = 0

                def forward(self, x):
                    self.calls += 1
                    return x * random.random()

            model = Noisy()
            with torch.cuda.graph(g):
                out = model(static_x)
        """,
        use_instead="""
            import torch

            class Noisy(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.calls = torch.zeros((), device="cuda")  # counted on every replay

                def forward(self, x):
                    self.calls += 1
                    return x * torch.rand((), device=x.device)

            model = Noisy()
            model(static_x)  # warm-up
            with torch.cuda.graph(g):
                out = model(static_x)
        """,
        consequences={
            GRAPH: "host code runs once at capture; every replay reuses the value it produced then",
            COMPILE: "torch.compile traces host state once and guards on it, recompiling or freezing the value",
        },
    )
)

_HOST_STATE_MODULES = ("time.", "random.", "numpy.random.", "datetime.datetime.now", "datetime.datetime.utcnow")
_OPERATORS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.BitOr: "|",
    ast.BitAnd: "&",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
}


class HostStateFrozen(Detector):
    rule = RULE

    def on_Call(self, w: FunctionWalker, call: ast.Call, name: str | None) -> None:
        if name and name.startswith(_HOST_STATE_MODULES):
            w.hazard(RULE.code, call, f"`{name}()` is evaluated once, at capture")

    def on_AugAssign(self, w: FunctionWalker, node: ast.AugAssign) -> None:
        """``self.step += 1`` and global counters update host state once, at capture."""
        target = node.target.value if isinstance(node.target, ast.Subscript) else node.target
        ty = w.ty(target)
        if ty is not None and ty.tensorish:
            return
        op = _OPERATORS.get(type(node.op), "?")
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            if _only_asserted(w.st.tree, target.attr):
                return  # a count of host executions that the tests check: frozen on purpose
            w.hazard(RULE.code, node, f"`{source_text(node.target)} {op}= ...` updates Python state")
        elif isinstance(target, ast.Name) and w.is_global_name(target.id):
            w.hazard(RULE.code, node, f"`{target.id} {op}= ...` updates a global Python counter")

    def on_Assign(self, w: FunctionWalker, node: ast.Assign) -> None:
        """`self.steps = self.steps + 1`, the spelled-out form of an augmented update."""
        if len(node.targets) != 1 or not isinstance(node.value, ast.BinOp):
            return
        target = node.targets[0]
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
            return
        text = source_text(target)
        if not any(isinstance(n, ast.Attribute) and source_text(n) == text for n in ast.walk(node.value)):
            return
        if any(ty is not None and ty.tensorish for ty in (w.ty(target), w.ty(node.value))):
            return  # a tensor counter updated on the device: replayed every time
        if _only_asserted(w.st.tree, target.attr):
            return
        w.hazard(RULE.code, node, f"`{text} = {text} ...` updates Python state")


def _only_asserted(tree: ast.Module, attr: str) -> bool:
    """Is the attribute read in this file, and only by assertions (`assert model.calls == 2`)?

    Such a counter counts Python executions, and the test checks exactly that a replay does
    not run Python: the frozen value is what it wants. Read anywhere else (a condition, a
    value, a schedule) the frozen count is a bug; read nowhere here, it may be read elsewhere.
    """
    reads, asserted, updates = _attribute_reads(tree)
    return attr in asserted and reads[attr] == asserted[attr] + updates[attr]


@functools.lru_cache(maxsize=4)
def _attribute_reads(tree: ast.Module) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """Per attribute name, in one walk of the file (asked for each candidate update, it
    walked the whole file three times per update): its reads, its reads inside assertions,
    and the reads that are part of an update of it (`self.steps = self.steps + 1`)."""
    reads: Counter[str] = Counter()
    asserted: dict[str, set[int]] = {}
    updates: Counter[str] = Counter()
    for node in ast.walk(tree):
        if _is_read(node):
            reads[node.attr] += 1
        if isinstance(node, ast.Assert) or _is_assert_call(node):
            for n in ast.walk(node):
                if _is_read(n):
                    asserted.setdefault(n.attr, set()).add(id(n))
        if isinstance(node, ast.Assign):
            stored = {t.attr for t in node.targets if isinstance(t, ast.Attribute)}
            updates.update(n.attr for n in ast.walk(node.value) if _is_read(n) and n.attr in stored)
    return reads, Counter({attr: len(ids) for attr, ids in asserted.items()}), updates


def _is_read(node: ast.AST) -> TypeGuard[ast.Attribute]:
    return isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)


def _is_assert_call(node: ast.AST) -> bool:
    """`self.assertEqual(model.calls, 2)`, `torch.testing.assert_close(...)`."""
    return isinstance(node, ast.Call) and source_text(node.func).rsplit(".", 1)[-1].startswith("assert")
