"""GL108 capture-without-warmup."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from graphlint.checkers.machinery import value_kinds as T
from graphlint.checkers.machinery.binder import FunctionWalker
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.machinery.names import source_text
from graphlint.checkers.machinery.syntax import FUNCTION_NODES, walk_no_defs
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL108",
        preview=True,
        preview_reason=(
            "On the real-code corpus (benchmarks/corpus: vLLM, SGLang, Megatron-core, TransformerEngine, DeepSpeed, tensordict, torchrl, torchtitan, torchao; 10,640 files), 0 of 30 findings were real: the warm-up was done by earlier calls guarded by a counter or flag, by a helper or another method, inside a stream context the analysis did not recognise (`functools.partial(torch.cuda.stream, s)`, vLLM's `graph_capture()`), or the captured work was host-only."
        ),
        name="capture-without-warmup",
        severity="warning",
        summary=(
            "A `torch.cuda.graph` capture of work that was not run before, in the same scope "
            "(or class), on a side stream (`with torch.cuda.stream(s):`)."
        ),
        why=(
            "The first run of a model initialises lazily: cuBLAS handles and workspaces, "
            "autotuning, allocator growth, DDP buckets. Inside a capture that work either fails "
            "or is recorded into the graph. PyTorch's documentation warms up on a side stream "
            "for that reason."
        ),
        example="""
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_out = model(static_x)
        """,
        use_instead="""
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    model(static_x)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_out = model(static_x)
        """,
    )
)

_LAZY_INIT = ": lazy initialisation (cuBLAS, autotuning, allocator growth) would happen during capture"


class CaptureWithoutWarmup(Detector):
    rule = RULE

    def on_capture(self, w: FunctionWalker, stmt: ast.With | ast.AsyncWith, context: ast.Call) -> None:
        """Was the captured work run before on a side stream, in this scope or class?"""
        captured = _callee_texts(stmt.body, w)
        if not captured:
            return  # only torch operators: nothing user-defined that needs a first run
        found_side_stream, warm = _side_stream_warmups(w, stmt)
        if found_side_stream and (captured & warm or _tails(captured) & _tails(warm)):
            return
        if _calls_stream_helper_before(w, stmt.lineno):
            return
        shown = ", ".join(f"`{c}`" for c in sorted(captured)[:3])
        eager = _callee_texts([s for s in w.body if s.end_lineno and s.end_lineno < stmt.lineno], w)
        if captured & eager:
            message = f"capture of {shown}, warmed up only on the capturing (current) stream, not a side stream"
        elif found_side_stream:
            message = f"capture of {shown}, which the side-stream warm-up before it never ran"
        else:
            message = f"capture of {shown} with no warm-up on a side stream before it"
        w.hazard(RULE.code, context, message + _LAZY_INIT, always=True)


def _side_stream_warmups(w: FunctionWalker, stmt: ast.stmt) -> tuple[bool, set[str]]:
    """Is there a side-stream block before the capture (or in another method), and what it calls."""
    warm: set[str] = set()
    found = False
    for scope in _warmup_scopes(w):
        for node in walk_no_defs(scope):
            if not isinstance(node, (ast.With, ast.AsyncWith)):
                continue
            if node.lineno >= stmt.lineno and scope is w.node:
                continue
            for item in node.items:
                ctx = item.context_expr
                if isinstance(ctx, ast.Call) and w.is_stream_context(ctx):
                    found = True
                    warm |= _callee_texts(node.body, w)
    return found, warm


def _warmup_scopes(w: FunctionWalker) -> Iterator[ast.AST]:
    yield w.node
    if w.class_qualname and w.class_qualname in w.st.class_nodes:
        for item in w.st.class_nodes[w.class_qualname].body:
            if isinstance(item, FUNCTION_NODES) and item is not w.node:
                yield item


def _callee_texts(body: list[ast.stmt], w: FunctionWalker) -> set[str]:
    """What a block calls, by source text, ignoring torch functions and tensor methods."""
    texts = set()
    for stmt in body:
        for node in walk_no_defs(stmt):
            if isinstance(node, ast.Call) and not _is_library_call(w, node):
                texts.add(source_text(node.func))
    return texts


def _is_library_call(w: FunctionWalker, node: ast.Call) -> bool:
    name = w.resolve(node.func)
    if name is not None and (name.startswith("torch.") or "." not in name):
        return True
    if isinstance(node.func, ast.Attribute):
        receiver = w.ty(node.func.value)
        if receiver is not None and (receiver.tensorish or receiver.kind in (T.STREAM, T.EVENT, T.GRAPH)):
            return True
        if receiver is None and node.func.attr in T.TENSOR_ONLY_METHODS | T.PY_METHODS:
            return True
    return False


def _tails(texts: set[str]) -> set[str]:
    return {text.rsplit(".", 1)[-1] for text in texts}


def _calls_stream_helper_before(w: FunctionWalker, line: int) -> bool:
    """A call before the capture to a function of this file that warms up on a side stream."""
    module_functions = {f"{w.st.module}.{n.name}": n for n in w.st.tree.body if isinstance(n, FUNCTION_NODES)}
    for stmt in w.body:
        for node in walk_no_defs(stmt):
            if isinstance(node, ast.Call) and node.lineno < line:
                target = module_functions.get(w.resolve(node.func) or "")
                if target is not None and _has_stream_block(w, target):
                    return True
    return False


def _has_stream_block(w: FunctionWalker, node: ast.AST) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, (ast.With, ast.AsyncWith)):
            for item in inner.items:
                ctx = item.context_expr
                if isinstance(ctx, ast.Call) and w.is_stream_context(ctx):
                    return True
    return False
