"""Warm-up before a capture: which captured calls are CUDA work, and which of them ran before.

A capture replays what ran once under it; the first run of a model initialises lazily
(cuBLAS handles, autotuning, JIT compiles, allocator growth), and that must not happen
inside the capture. Real code warms up in many shapes, and any eager run of the same work
before the capture does it, on whichever stream:

  - earlier in the same function, however nested (`with graph_capture():`, a stream
    context, a `for _ in range(3):` loop), not in a branch the capture excludes;
  - in earlier calls of the same function, when a counter or flag decides which calls
    run eagerly and which captures (`if self.step < warmup: return f(x)` ... capture);
    a branch chosen by fixed configuration (`if not self.use_graphs: return f(x)`) or an
    `except` fallback is not a warm-up;
  - in another method of the class, or a helper of this file called before the capture;
  - for a callable parameter, by the callers of this file that pass it (none in this
    file: the caller's business, not judged here).

A call inside a capture is never a warm-up, not even of a capture in another branch.
What needs warming is CUDA work: user callees, not torch operators, tensor/stream/event
methods (`self._events[0].record()`), logging, host-only CUDA library calls (NVRTC, the
driver's module and device queries), or calls expected to raise (`pytest.raises`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from itertools import pairwise

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.binder import CAPTURE_CONTEXTS, FunctionWalker
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.core.syntax import FUNCTION_NODES, exits, walk_no_defs

# Methods of events, streams and graphs (whatever the receiver's inferred kind): not work to warm.
_STREAM_EVENT_METHODS = frozenset(
    {"record", "wait", "wait_event", "wait_stream", "synchronize", "query", "elapsed_time", "record_stream", "replay"}
)
# Methods of Python containers and strings, on a receiver of unknown kind.
_CONTAINER_METHODS = frozenset(
    {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "get", "items", "keys"}
    | {"values", "add", "discard", "format", "startswith", "endswith", "split", "strip", "lower", "upper"}
)
# Methods that order streams or threads (an offloader's `join_after_forward`, `wait_for_copy`).
_ORDERING_PREFIXES = ("wait_", "join", "sync_", "record_")
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})
# Host-only CUDA library calls: compile (NVRTC), load modules, query devices and errors.
_HOST_ONLY_PREFIXES = (
    "nvrtc",
    "cuModule",
    "cuLibrary",
    "cuKernelGet",
    "cuFuncGet",
    "cuFuncSetAttribute",
    "cuDeviceGet",
    "cuCtxGet",
    "cuInit",
    "cuGetError",
    "cuOccupancy",
    "cudaGetDevice",
    "cudaGetError",
    "cudaDeviceGetAttribute",
    "cudaFuncGetAttributes",
    "cudaFuncSetAttribute",
)
_RAISES_CONTEXTS = frozenset({"raises", "assertRaises", "assertRaisesRegex"})
_INIT_METHODS = frozenset({"__init__", "__post_init__", "setup", "setUp"})
_HELPER_DEPTH = 3


def is_capture(w: FunctionWalker, stmt: ast.AST) -> bool:
    """A `with torch.cuda.graph(...)` (or an accelerator's `capture_to_graph`) statement."""
    if not isinstance(stmt, (ast.With, ast.AsyncWith)):
        return False
    for item in stmt.items:
        ctx = item.context_expr
        if isinstance(ctx, ast.Name) and ctx.id in w.capture_contexts:
            return True
        if isinstance(ctx, ast.Call):
            if w.resolve(ctx.func) in CAPTURE_CONTEXTS:
                return True
            if isinstance(ctx.func, ast.Attribute) and ctx.func.attr == "capture_to_graph":
                return True
    return False


def call_text(call: ast.Call) -> str:
    return source_text(call.func)


def captured_work(w: FunctionWalker, stmt: ast.With | ast.AsyncWith) -> list[ast.Call]:
    """The calls of a capture body that launch CUDA work of the user's, in source order."""
    calls = [node for node in _walk_skipping_raises(stmt.body) if isinstance(node, ast.Call)]
    work = [call for call in calls if not _is_library_call(w, call) and not _is_host_only(w, call)]
    return sorted(work, key=lambda c: (c.lineno, c.col_offset))


def _walk_skipping_raises(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """walk_no_defs over ``body``, not entering `with pytest.raises(...)` blocks."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(_is_raises(i.context_expr) for i in node.items):
            continue
        yield node
        children = [
            c for c in ast.iter_child_nodes(node) if not isinstance(c, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef))
        ]
        stack.extend(reversed(children))


def _is_raises(ctx: ast.expr) -> bool:
    return isinstance(ctx, ast.Call) and source_text(ctx.func).rsplit(".", 1)[-1] in _RAISES_CONTEXTS


def _is_library_call(w: FunctionWalker, node: ast.Call) -> bool:
    """torch functions, builtins, tensor/stream/event methods: nothing of the user's to warm."""
    name = w.resolve(node.func)
    if name is not None and (name.startswith("torch.") or "." not in name):
        return True
    if isinstance(node.func, ast.Attribute):
        attr = node.func.attr
        receiver = w.ty(node.func.value)
        if receiver is not None and (receiver.tensorish or receiver.kind in (T.PY, T.STREAM, T.EVENT, T.GRAPH)):
            return True
        if receiver is None and attr in T.TENSOR_ONLY_METHODS | T.PY_METHODS | _CONTAINER_METHODS:
            return True
        if attr in _STREAM_EVENT_METHODS or attr.startswith(_ORDERING_PREFIXES):
            return True
        if attr in _LOG_METHODS and "log" in source_text(node.func.value).lower():
            return True
    return False


def _is_host_only(w: FunctionWalker, node: ast.Call) -> bool:
    """NVRTC compiles and CUDA driver/runtime queries (cuda-python): they launch nothing."""
    name = w.resolve(node.func) or source_text(node.func)
    parts = name.split(".")
    return "nvrtc" in parts or parts[-1].startswith(_HOST_ONLY_PREFIXES)


def unwarmed(w: FunctionWalker, stmt: ast.With | ast.AsyncWith, work: list[ast.Call]) -> tuple[list[str], bool]:
    """The captured work (by text, in order) that never ran before; and whether other work of
    the user's ran eagerly before it in this function (a warm-up of something else)."""
    warm = {_key(text) for text in warm_texts(w, w.node, stmt)}
    tails = {text.rsplit(".", 1)[-1] for text in warm}
    elements = _loop_elements(w.node)
    cold: list[str] = []
    for call in work:
        text = call_text(call)
        keys = {_key(text), *elements.get(text, ())}
        if keys & warm or {k.rsplit(".", 1)[-1] for k in keys} & tails or text in cold:
            continue
        if _param_warmed_by_callers(w, call):
            continue
        cold.append(text)
    ran_other = any(not _is_library_call(w, c) for c in _eager_before(w, w.node, stmt))
    return cold, ran_other


def _key(text: str) -> str:
    """`vit.blocks[0]` and `vit.blocks[i]` are the same work for warming: `vit.blocks[]`."""
    return re.sub(r"\[[^\[\]]*\]", "[]", text)


def _loop_elements(func: ast.AST) -> dict[str, set[str]]:
    """`for blk in vit.blocks` / `for i, blk in enumerate(vit.blocks)`: blk is `vit.blocks[]`."""
    elements: dict[str, set[str]] = {}
    for node in walk_no_defs(func):
        if not isinstance(node, (ast.For, ast.AsyncFor)):
            continue
        target, source = node.target, node.iter
        if isinstance(source, ast.Call) and source_text(source.func) == "enumerate" and source.args:
            source = source.args[0]
            if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target = target.elts[1]
        if isinstance(target, ast.Name):
            elements.setdefault(target.id, set()).add(_key(source_text(source)) + "[]")
    return elements


def warm_texts(w: FunctionWalker, func: ast.AST, stmt: ast.stmt) -> set[str]:
    """Texts of the calls that ran eagerly before ``stmt`` (in ``func``, its class, its helpers)."""
    warm: set[str] = set()
    direct = list(_eager_before(w, func, stmt))
    for call in direct:
        warm.add(call_text(call))
    warm |= _helper_texts(w, direct, _HELPER_DEPTH, {id(func)})
    if func is w.node:
        for method in _other_methods(w):
            warm |= {call_text(c) for c in _eager_calls(w, method)}
    return warm


def _other_methods(w: FunctionWalker) -> Iterator[ast.AST]:
    if w.class_qualname and w.class_qualname in w.st.class_nodes:
        for item in w.st.class_nodes[w.class_qualname].body:
            if isinstance(item, FUNCTION_NODES) and item is not w.node:
                yield item


def _eager_calls(w: FunctionWalker, func: ast.AST) -> Iterator[ast.Call]:
    """Every call of ``func`` that is not inside a capture."""
    stack: list[ast.AST] = [func]
    while stack:
        node = stack.pop()
        if node is not func and is_capture(w, node):
            continue
        if isinstance(node, ast.Call):
            yield node
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, (*FUNCTION_NODES, ast.ClassDef)))


def _helper_texts(w: FunctionWalker, calls: list[ast.Call], depth: int, seen: set[int]) -> set[str]:
    """What the helpers of this file called before the capture run eagerly, a few levels down."""
    if depth == 0:
        return set()
    texts: set[str] = set()
    for call in calls:
        helper = _same_file_function(w, call)
        if helper is None or id(helper) in seen:
            continue
        seen.add(id(helper))
        inner = list(_eager_calls(w, helper))
        texts |= {call_text(c) for c in inner}
        texts |= _handed_and_called(call, helper, inner)
        texts |= _helper_texts(w, inner, depth - 1, seen)
    return texts


def _handed_and_called(call: ast.Call, helper: ast.AST, inner: list[ast.Call]) -> set[str]:
    """`_timed(label, step)` where `_timed(label, run)` calls `run()`: `step` ran."""
    if not isinstance(helper, FUNCTION_NODES):
        return set()
    params = [a.arg for a in (*helper.args.posonlyargs, *helper.args.args)]
    called = {c.func.id for c in inner if isinstance(c.func, ast.Name)}
    handed = {source_text(call.args[i]) for i, p in enumerate(params[: len(call.args)]) if p in called}
    handed |= {source_text(k.value) for k in call.keywords if k.arg in called}
    return handed


def _same_file_function(w: FunctionWalker, call: ast.Call) -> ast.AST | None:
    name = w.resolve(call.func)
    if name is not None and name.startswith(f"{w.st.module}."):
        local = name[len(w.st.module) + 1 :]
        for node in w.st.tree.body:
            if isinstance(node, FUNCTION_NODES) and node.name == local:
                return node
    return None


# -- the order of calls within one function ------------------------------------------------


def _eager_before(w: FunctionWalker, func: ast.AST, stmt: ast.stmt) -> Iterator[ast.Call]:
    """Calls of ``func`` outside captures that ran before ``stmt``, in this call or an earlier one."""
    parents = _parents(func)
    stmt_path = _path(stmt, parents)
    on_path = {id(node) for node in stmt_path}
    later_call_captures = any(
        isinstance(node, ast.If) and _is_state(w, func, node.test) for node in stmt_path if node is not stmt
    )
    for call in _eager_calls(w, func):
        call_path = _path(call, parents)
        if any(id(node) == id(stmt) for node in call_path):
            continue  # the capture's own header
        verdict = _separated(w, func, call_path, on_path, stmt)
        if verdict is True or (verdict is None and (call.lineno < stmt.lineno or later_call_captures)):
            yield call


def _separated(
    w: FunctionWalker, func: ast.AST, call_path: list[ast.AST], on_path: set[int], stmt: ast.stmt
) -> bool | None:
    """Is the call on a path that excludes the capture in this call? True: a warm-up all the
    same (state decides which calls run it), False: never a warm-up, None: not separated."""
    for child, parent in pairwise(call_path):
        if id(parent) in on_path:
            return _across_branches(w, func, parent, child, _child_towards(parent, on_path, stmt))
        if isinstance(parent, ast.If) and isinstance(child, (ast.expr, ast.stmt)) and child.lineno < stmt.lineno:
            branch = _branch(parent, child)
            if branch in ("body", "orelse") and exits(getattr(parent, branch)):
                return _is_state(w, func, parent.test)  # `if warm_needed: f(); return` then capture
    return None


def _across_branches(
    w: FunctionWalker, func: ast.AST, parent: ast.AST, call_side: ast.AST, stmt_side: ast.AST | None
) -> bool | None:
    if stmt_side is None:
        return None
    mine, theirs = _branch(parent, call_side), _branch(parent, stmt_side)
    if mine == theirs or mine is None or theirs is None:
        return None
    if isinstance(parent, ast.If):
        return _is_state(w, func, parent.test) if {mine, theirs} == {"body", "orelse"} else None
    if isinstance(parent, ast.Try) or type(parent).__name__ == "TryStar":
        if theirs.startswith("handlers"):
            return mine == "body"  # it ran, failed, and the handler captures
        return False if mine.startswith("handlers") else None  # an except fallback is no warm-up
    if isinstance(parent, ast.Match):
        return _is_state(w, func, parent.subject)
    return None


def _child_towards(parent: ast.AST, on_path: set[int], stmt: ast.stmt) -> ast.AST | None:
    if parent is stmt:
        return None
    for child in ast.iter_child_nodes(parent):
        if id(child) in on_path:
            return child
    return None


def _branch(parent: ast.AST, child: ast.AST) -> str | None:
    """Which alternative of ``parent`` holds ``child``: body, orelse, handlers[i], cases[i]..."""
    for field in ("body", "orelse", "finalbody"):
        if any(node is child for node in getattr(parent, field, ()) or ()):
            return field
    for index, handler in enumerate(getattr(parent, "handlers", ()) or ()):
        if handler is child:
            return f"handlers[{index}]"
    for index, case in enumerate(getattr(parent, "cases", ()) or ()):
        if case is child:
            return f"cases[{index}]"
    return None


def _parents(func: ast.AST) -> dict[int, ast.AST]:
    parents: dict[int, ast.AST] = {}
    for node in walk_no_defs(func):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def _path(node: ast.AST, parents: dict[int, ast.AST]) -> list[ast.AST]:
    """``node`` and its ancestors up to the function, innermost first."""
    path = [node]
    while id(path[-1]) in parents:
        path.append(parents[id(path[-1])])
    return path


# -- state or configuration ----------------------------------------------------------------


def _is_state(w: FunctionWalker, func: ast.AST, test: ast.expr) -> bool:
    """Does ``test`` read state that changes between calls (a counter, a flag, a cache, a
    per-call argument), rather than fixed configuration (constants, module globals, `self`
    attributes set only in `__init__`, torch's device queries)?"""
    local_names = _local_names(func)
    mutated = _mutated_self_attrs(w)
    for node in walk_no_defs(test):
        if isinstance(node, ast.Call):
            name = w.resolve(node.func)
            if name is None or not name.startswith("torch."):
                return True
        elif isinstance(node, ast.Name) and node.id in local_names:
            return True
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            if node.attr in mutated:
                return True
    return False


def _local_names(func: ast.AST) -> set[str]:
    names: set[str] = set()
    if isinstance(func, FUNCTION_NODES):
        args = func.args
        names |= {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} - {"self", "cls"}
        names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for node in walk_no_defs(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _mutated_self_attrs(w: FunctionWalker) -> set[str]:
    """`self` attributes stored or mutated in a method of the class other than `__init__`."""
    mutated: set[str] = set()
    methods = [w.node, *_other_methods(w)] if w.class_qualname else []
    for method in methods:
        if getattr(method, "name", "") in _INIT_METHODS:
            continue
        for node in walk_no_defs(method):
            root = None
            if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                root = _self_root(node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                root = _self_root(node.func.value)  # self._seen.add(key), self.hits[k].append(...)
            if root is not None:
                mutated.add(root)
    return mutated


def _self_root(node: ast.expr) -> str | None:
    """``x`` of `self.x`, `self.x[k]`, `self.x.y` (the attribute of self at the root)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return node.attr
        node = node.value
    return None


# -- callable parameters: their warm-up is the callers' --------------------------------------


def _param_warmed_by_callers(w: FunctionWalker, call: ast.Call) -> bool:
    """`fn(...)` captured, `fn` a parameter: do the callers of this file run what they pass
    eagerly before the call? No caller in this file: not judged here (True)."""
    func = w.node
    if not isinstance(call.func, ast.Name) or not isinstance(func, FUNCTION_NODES):
        return False
    params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
    if call.func.id not in params and call.func.id not in {a.arg for a in func.args.kwonlyargs}:
        return False
    sites = list(_call_sites(w, func))
    for caller, site, stmt in sites:
        passed = _argument_for(site, call.func.id, params)
        if passed is None or source_text(passed) not in warm_texts(w, caller, stmt):
            return False
    return True


def _call_sites(
    w: FunctionWalker, func: ast.FunctionDef | ast.AsyncFunctionDef
) -> Iterator[tuple[ast.AST, ast.Call, ast.stmt]]:
    """(calling function, call, its statement) for each call of ``func`` in this file."""
    is_method = w.class_qualname is not None
    for caller in ast.walk(w.st.tree):
        if not isinstance(caller, FUNCTION_NODES) or caller is func:
            continue
        parents = _parents(caller)
        for node in walk_no_defs(caller):
            if not isinstance(node, ast.Call):
                continue
            target = node.func
            if is_method:
                hit = (
                    isinstance(target, ast.Attribute)
                    and target.attr == func.name
                    and source_text(target.value) == "self"
                )
            else:
                hit = isinstance(target, ast.Name) and target.id == func.name
            if hit:
                yield caller, node, _statement_of(node, parents)


def _statement_of(node: ast.AST, parents: dict[int, ast.AST]) -> ast.stmt:
    while not isinstance(node, ast.stmt) and id(node) in parents:
        node = parents[id(node)]
    return node  # type: ignore[return-value]


def _argument_for(site: ast.Call, param: str, params: list[str]) -> ast.expr | None:
    for keyword in site.keywords:
        if keyword.arg == param:
            return keyword.value
    positional = [p for p in params if p not in ("self", "cls")]
    index = positional.index(param) if param in positional else -1
    if 0 <= index < len(site.args) and not any(isinstance(a, ast.Starred) for a in site.args[: index + 1]):
        return site.args[index]
    return None
