"""The captured region of a `with torch.cuda.graph(g):` block, as code that can run again
eagerly without touching the program's Python state (pure: `ast` only).

GL512 (`--compare-eager`) runs each captured block a second time, eagerly, beside a replay,
and compares the outputs. Running the block's own source again is what makes the comparison
mean something: it reads the program's values as they are at that replay (a Python float
changed since the capture, a static input rebound instead of refilled), while the graph
replays what it froze. So the block must run with no effect the program can see:

- a name it binds goes into a copy of the frame's namespace, never the frame itself;
- an attribute or a subscript it stores into (`self.out = ...`, `outputs[bs] = ...`) is
  rewritten into a call of `__graphlint_store__`, which keeps the value aside (a tensor
  subscript is an in-place write of device memory: the caller restores those);
- what it cannot run that way is refused with the reason: a `return`, `yield`, `await`,
  `global` or `nonlocal`; an augmented store into an attribute or subscript; a training step
  (`backward`, an optimizer's `step`, `zero_grad`), which a second run would apply twice; and
  a read of something the block itself stored into an attribute, which the rewrite would
  answer with the program's value instead of the block's.

The outputs compared are the texts of what the block binds or stores (`y`, `self.out`,
`outputs[bs]`), evaluated in the frame after the capture on the graph's side and in the
copy after the eager run on the other.

A name the block reads is taken as the frame holds it at the replay, except the names bound
inside a loop around the block (`for bs in sizes:` capturing one graph per size, with a
static input made per size): those are *pinned* to their values at the capture, or every
graph but the last would be compared with the last one's inputs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from types import CodeType

STORE = "__graphlint_store__"
_TRAINING_CALLS = frozenset({"backward", "step", "zero_grad"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)  # nested: a scope of their own


class NotComparable(Exception):
    """The block cannot run again without an effect on the program; the message says why."""


@dataclass(frozen=True)
class RegionProgram:
    code: CodeType  # the rewritten block, compiled for `exec` in a copy of the frame's namespace
    outputs: tuple[str, ...]  # what the block binds or stores, as source text, in order
    pinned: tuple[str, ...] = ()  # names bound in a loop around the block: read as at the capture
    reads: tuple[str, ...] = ()  # names and attribute chains the block reads (`temperature`, `self.static_x`)


def region_program(source: str, filename: str, line: int) -> RegionProgram:
    """The `with` block whose header holds ``line`` (the line `__enter__` was called from)."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as error:
        raise NotComparable(f"its source does not parse ({error.msg}, line {error.lineno})") from None
    found = _with_at(tree, line)
    if found is None:
        raise NotComparable(f"no `with` statement at {filename}:{line} (a capture not written as a with block)")
    block, loops = found
    rewriter = _Rewriter()
    body = [rewriter.visit(statement) for statement in block.body]
    outputs = tuple(dict.fromkeys(rewriter.outputs))
    module = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    code = compile(module, filename, "exec")
    pinned = sorted({name for loop in loops for name in _bound_in(loop)})
    return RegionProgram(code, outputs, tuple(pinned), _reads(block.body, outputs))


def _reads(body: list[ast.stmt], bound: tuple[str, ...]) -> tuple[str, ...]:
    """The whole names and attribute chains the block loads (`self.cfg.temp`, not `self.cfg`),
    outside nested functions, leaving out what the block binds itself: what a GL512 finding
    checks for a change since the capture."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, _SCOPES):
            return
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            return  # a store target: what it stores into is an output, not a read
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            root: ast.expr = node
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name):
                if root.id not in bound:
                    found.append(ast.unparse(node))
                return
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in body:
        visit(statement)
    return tuple(dict.fromkeys(found))


def _with_at(tree: ast.AST, line: int) -> tuple[ast.With, list[ast.stmt]] | None:
    """The innermost `with` statement whose header (its items) spans ``line``, and the loops
    around it in its own function."""
    found: tuple[ast.With, list[ast.stmt]] | None = None

    def walk(node: ast.AST, loops: list[ast.stmt]) -> None:
        nonlocal found
        for child in ast.iter_child_nodes(node):
            inner = loops
            if isinstance(child, _SCOPES):
                inner = []
            elif isinstance(child, (ast.For, ast.AsyncFor, ast.While)):
                inner = [*loops, child]
            elif isinstance(child, ast.With) and child.body:
                header_end = max((item.context_expr.end_lineno or child.lineno) for item in child.items)
                if child.lineno <= line <= header_end:
                    found = (child, loops)
            walk(child, inner)

    walk(tree, [])
    return found


def _bound_in(loop: ast.stmt) -> set[str]:
    """Every plain name a loop binds in its own scope (its target and its body's stores)."""
    bound: set[str] = set()
    stack: list[ast.AST] = [loop]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, _SCOPES):
                stack.append(child)
    return bound


class _Rewriter(ast.NodeTransformer):
    """Rewrites stores into attributes and subscripts; refuses what cannot be run again."""

    def __init__(self) -> None:
        self.outputs: list[str] = []
        self._stored: set[str] = set()  # attribute texts stored so far
        self._depth = 0  # inside a nested def or lambda: its own scope, left alone

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return self._nested(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return self._nested(node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return self._nested(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return self._nested(node)

    def _nested(self, node: ast.AST) -> ast.AST:
        self._depth += 1
        try:
            return self.generic_visit(node)
        finally:
            self._depth -= 1

    def visit_Return(self, node: ast.Return) -> ast.AST:
        return self._flow(node, "a `return`")

    def visit_Yield(self, node: ast.Yield) -> ast.AST:
        return self._flow(node, "a `yield`")

    def visit_YieldFrom(self, node: ast.YieldFrom) -> ast.AST:
        return self._flow(node, "a `yield from`")

    def visit_Await(self, node: ast.Await) -> ast.AST:
        return self._flow(node, "an `await`")

    def visit_Global(self, node: ast.Global) -> ast.AST:
        return self._flow(node, "a `global` statement")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> ast.AST:
        return self._flow(node, "a `nonlocal` statement")

    def _flow(self, node: ast.stmt | ast.expr, what: str) -> ast.AST:
        if self._depth == 0:
            raise NotComparable(f"the block holds {what} (line {node.lineno}), which cannot run on its own")
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if self._depth == 0 and name in _TRAINING_CALLS:
            raise NotComparable(
                f"the block trains (`{ast.unparse(node.func)}()` at line {node.lineno}): a second eager run "
                "would apply it twice"
            )
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and self._depth == 0 and ast.unparse(node) in self._stored:
            raise NotComparable(
                f"the block reads `{ast.unparse(node)}` back (line {node.lineno}) after storing into it: "
                "run again, it would read the program's value, not its own"
            )
        return self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        if self._depth == 0 and not isinstance(node.target, ast.Name):
            raise NotComparable(
                f"the block updates `{ast.unparse(node.target)}` in place (line {node.lineno}); write it as "
                "a plain assignment to have the region compared"
            )
        if self._depth == 0:
            self.outputs.append(node.target.id)  # type: ignore[union-attr]
        return self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST | list[ast.stmt]:
        if self._depth:
            return self.generic_visit(node)
        node.value = self.visit(node.value)
        if all(_names(target) is not None for target in node.targets):
            for target in node.targets:
                self.outputs.extend(_names(target) or [])
            return node
        if len(node.targets) != 1 or not isinstance(node.targets[0], (ast.Attribute, ast.Subscript)):
            raise NotComparable(
                f"the block stores into attributes or subscripts by unpacking (line {node.lineno}); "
                "one target per assignment is compared"
            )
        return self._store(node.targets[0], node.value, node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if self._depth or node.value is None:
            return node
        node.value = self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self.outputs.append(node.target.id)
            return node
        return self._store(node.target, node.value, node)

    def visit_Delete(self, node: ast.Delete) -> ast.AST:
        if self._depth == 0 and any(not isinstance(t, ast.Name) for t in node.targets):
            raise NotComparable(f"the block deletes an attribute or item (line {node.lineno})")
        return node

    def visit_For(self, node: ast.For) -> ast.AST:
        if self._depth == 0:
            if _names(node.target) is None:
                raise NotComparable(f"the block's loop stores into an attribute or item (line {node.lineno})")
            self.outputs.extend(_names(node.target) or [])
        return self.generic_visit(node)

    def visit_With(self, node: ast.With) -> ast.AST:
        if self._depth == 0:
            for item in node.items:
                if item.optional_vars is not None:
                    if _names(item.optional_vars) is None:
                        raise NotComparable(f"the block's `with ... as` stores into an attribute (line {node.lineno})")
                    self.outputs.extend(_names(item.optional_vars) or [])
        return self.generic_visit(node)

    def _store(self, target: ast.expr, value: ast.expr, at: ast.stmt) -> ast.stmt:
        """`obj.name = v` / `obj[key] = v` as `__graphlint_store__("text", v, obj, key)`."""
        target = self.visit(target)
        text = ast.unparse(target)
        self.outputs.append(text)
        if isinstance(target, ast.Attribute):
            self._stored.add(text)
            container: ast.expr = ast.Constant(None)
            key: ast.expr = ast.Constant(None)
        else:
            assert isinstance(target, ast.Subscript)
            container, key = _load(target.value), _key(target.slice)
        call = ast.Call(ast.Name(STORE, ast.Load()), [ast.Constant(text), value, container, key], [])
        return ast.copy_location(ast.Expr(call), at)


def _names(target: ast.expr) -> list[str] | None:
    """The plain names a binding target binds, or None if it stores into anything else."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        found: list[str] = []
        for element in target.elts:
            names = _names(element)
            if names is None:
                return None
            found.extend(names)
        return found
    return None


def _load(node: ast.expr) -> ast.expr:
    """A copy of an expression as a read (a subscript's container)."""
    copied = ast.parse(ast.unparse(node), mode="eval").body
    return ast.copy_location(copied, node)


def _key(node: ast.expr) -> ast.expr:
    """A subscript's key as a value: `a:b` as `slice(a, b)`, tuples element by element."""
    if isinstance(node, ast.Slice):
        parts = [_key(p) if p is not None else ast.Constant(None) for p in (node.lower, node.upper, node.step)]
        return ast.copy_location(ast.Call(ast.Name("slice", ast.Load()), parts, []), node)
    if isinstance(node, ast.Tuple):
        return ast.copy_location(ast.Tuple([_key(e) for e in node.elts], ast.Load()), node)
    return _load(node)
