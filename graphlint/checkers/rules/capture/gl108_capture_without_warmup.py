"""GL108 capture-without-warmup."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery import warmup
from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.detectors import Detector
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL108",
        preview=True,
        preview_reason=(
            "The false ones are tests that capture cold on purpose and callees that need no warm-up but are not recognised as such (the warm-up analysis now sees warm-ups in earlier calls, other methods, helpers and callers)."
        ),
        name="capture-without-warmup",
        severity="warning",
        summary=(
            "A `torch.cuda.graph` capture of work that never ran eagerly before it: not earlier "
            "in the function, not in an earlier call (a counter or flag choosing warm-up calls), "
            "not in another method of the class or a helper it calls."
        ),
        why=(
            "The first run of a model initialises lazily: cuBLAS handles and workspaces, "
            "autotuning, allocator growth, DDP buckets. Inside a capture that work either fails "
            "or is recorded into the graph. Any eager run of the same work first does it; "
            "PyTorch's documentation runs it on a side stream, the safest form."
        ),
        example="""
            import torch

            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_out = model(static_x)
        """,
        use_instead="""
            import torch

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
        """Did the captured CUDA work run eagerly before: here, in earlier calls, the class, a helper?"""
        work = warmup.captured_work(w, stmt)
        if not work:
            return  # only torch operators and host-only calls: nothing of the user's needs a first run
        cold, warmed_something = warmup.unwarmed(w, stmt, work)
        if not cold:
            return
        shown = ", ".join(f"`{text}`" for text in cold[:3])
        if warmed_something:
            message = f"capture of {shown}, which never ran eagerly before it (only other work did)"
        else:
            message = f"capture of {shown} with no eager warm-up run before it"
        w.hazard(RULE.code, context, message + _LAZY_INIT, always=True)
