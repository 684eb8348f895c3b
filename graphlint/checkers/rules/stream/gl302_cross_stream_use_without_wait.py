"""GL302 cross-stream-use-without-wait.

Two behaviours. In the default set: a wait that orders the *default* stream where the
function's own work is on the *current* one (`side.wait_stream(torch.cuda.default_stream())`,
`torch.cuda.default_stream().wait_stream(side)`): the two differ in autograd's backward and
under a caller's stream context, and DeepSpeed and Megatron-LM both shipped it as a NaN bug
(fixed by waiting on `current_stream()`); and a stream made to wait for `current_stream()`
inside its own block, where that is itself (Megatron-LM fixed it in its FSDP optimizer);
and a block entered on a stream made in its own `with` (`torch.cuda.stream(torch.cuda.Stream())`),
which no wait can name, in a function with no device-wide sync (Megatron-LM's DDP setup race);
and a fork right before a stream block, or a join right after one, that names another side
stream and leaves the block's own stream unordered (apex's halo correction, Megatron-LM's
offloaded optimizer).
And a tensor produced on one stream and used on another with no wait between, where the
function shows the whole story (`stream_certainty`): made in a side-stream block and used
after it where the orderings that can run between the two are forks only (the prefetch
slip; a join after the loop that reads back `outs[i - 1]` comes too late), or written here
on the current stream and read in a side stream's block where the orderings between are
joins only (Megatron-LM 7eed06b0, TransformerEngine 039fcd1f), or between two side streams
where they are `wait_stream`s of named streams only; a wait in one arm of an `if` orders
nothing another arm wrote (TransformerEngine 611d876e), nor a use whose branch tests
contradict its own (apex 705aa35d); no helper handed a stream. And a tensor attribute one
method writes in a side stream's block and never orders back, returned by a getter of the
class that waits for nothing (apex be4c41c2: a gradient norm read for clipping while its
reduction still ran), from `attribute_escapes`. And `torch.cuda.current_stream()` bound into
a `functools.partial` that the function hands on to run later (TransformerEngine 23a3f543's
delayed wgrad GEMM), from `deferred_stream`.
In preview: the other cross-stream uses, which on real code are mostly ordered elsewhere.
"""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.machinery.flows.stream.attribute_escapes import SideAttributeReturned
from graphlint.checkers.machinery.flows.stream.deferred_stream import deferred_stream
from graphlint.checkers.machinery.flows.stream.stream_flow import (
    MAIN,
    CrossStreamUse,
    DefaultStreamWait,
    SelfWait,
    UnorderedNewStream,
    WrongStreamWait,
    show_stream,
)
from graphlint.findings import Fix
from graphlint.fixing.ops import RenameAttribute
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL302",
        fix="unsafe",
        preview_behaviour=(
            "a tensor produced on one stream and used on another with no wait between them, "
            "into a side-stream block or out of it, where the function has joins, events, syncs "
            "or helpers handed a stream that may order it, or the tensor comes from elsewhere. The false ones are orderings done by a caller "
            "or callee in another file, events handed in by keyword, and streams from helpers in "
            "other files."
        ),
        default_set_note=(
            "The default mode reports the waits that name the default stream for the current one, "
            "the streams made to wait for themselves, the blocks on a stream made in the `with` "
            "itself that no sync orders, and the forks and joins next to a block that name another "
            "stream, and the cross-stream uses of tensors written in the function where no ordering "
            "it could have hidden can run between the write and the use (only forks, or only joins, "
            "none in an arm the write's path skips, and no stream handed to a helper); real code has "
            "few, and each one the history benchmark met was a bug its maintainers fixed "
            "(benchmarks/recall/bugfix_pairs.toml: DeepSpeed be60451f, Megatron-LM 3548385a, "
            "9bc05526, de56227b, ae670762 and 7eed06b0, apex a5d51c01, 05dd9c69 and 705aa35d, "
            "TransformerEngine 039fcd1f, 611d876e, 86ade9ea and 23a3f543, ColossalAI cd736c81 and d86ddd9b)."
        ),
        name="cross-stream-use-without-wait",
        summary=(
            "A tensor produced on one stream and used on another with no `wait_stream`, "
            "`wait_event` or event wait between producer and consumer, in either direction (into "
            "a side-stream block, or out of it); or a wait that orders the default stream where "
            "the producer or consumer is the current stream; or a stream made to wait for "
            "`current_stream()` inside its own `torch.cuda.stream(...)` block, which is itself; or a "
            "block on a stream made in the `with` itself (`torch.cuda.stream(torch.cuda.Stream())`), "
            "which nothing can wait for, with no device-wide sync around it; or a fork just before a "
            "block (a join just after one) that names another side stream than the block's; or a "
            "tensor attribute written in a side stream's block by a method that orders nothing after "
            "it, returned by another method of the class (a getter, a property) with no wait; or "
            "`torch.cuda.current_stream()` bound into a `functools.partial` that is handed on to run "
            "later, under another stream."
        ),
        why=(
            "Streams run concurrently: the consumer can read the tensor before the producer has "
            "written it. `default_stream()` is the current stream only until something sets "
            "another: autograd runs backward ops (and their hooks) on the stream of their forward "
            "op, and a caller may run the code under `with torch.cuda.stream(s):`."
        ),
        example="""
            import torch

            class GradReducer:
                def __init__(self):
                    self.side = torch.cuda.Stream()

                def reduce(self, grad, bucket):
                    self.side.wait_stream(torch.cuda.default_stream())
                    with torch.cuda.stream(self.side):
                        bucket.copy_(grad, non_blocking=True)
        """,
        use_instead="""
            import torch

            class GradReducer:
                def __init__(self):
                    self.side = torch.cuda.Stream()

                def reduce(self, grad, bucket):
                    self.side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(self.side):
                        bucket.copy_(grad, non_blocking=True)
        """,
    )
)


class CrossStreamUseWithoutWait(Detector):
    rule = RULE

    def on_CrossStreamUse(self, w: FunctionWalker, event: CrossStreamUse) -> None:
        direction = "into" if event.stream != MAIN else "out of"
        w.hazard(
            RULE.code,
            event.node,
            f"`{event.name}` is produced on `{show_stream(event.producer)}` and used on "
            f"`{show_stream(event.stream)}` ({direction} a side-stream block) with no wait between them",
            always=True,
            preview=not event.certain,
        )

    def on_SideAttributeReturned(self, w: FunctionWalker, event: SideAttributeReturned) -> None:
        w.hazard(
            RULE.code,
            event.node,
            f"`self.{event.attr}` is written on `{event.stream}` in `{event.writer}` (line {event.line}), which "
            "makes nothing wait for that stream afterwards, and is returned here with no wait either: the "
            "caller reads it on its current stream while the side stream may still be writing it",
            always=True,
        )

    def on_DefaultStreamWait(self, w: FunctionWalker, event: DefaultStreamWait) -> None:
        side = show_stream(event.side)
        if event.join:
            what = f"the default stream waits for `{side}`, but the work after it here is queued on the current stream"
        else:
            what = f"`{side}` waits for the default stream, but the work it must follow is queued on the current stream"
        w.hazard(
            RULE.code,
            event.node,
            f"{what}, which is another stream in autograd's backward or under a caller's "
            "`torch.cuda.stream(...)`: the two are not ordered",
            fix=_current_stream_fix(w, event.default),
            always=True,
        )

    def on_SelfWait(self, w: FunctionWalker, event: SelfWait) -> None:
        w.hazard(
            RULE.code,
            event.node,
            f"`{event.stream}` waits for itself: inside `torch.cuda.stream({event.stream})`, "
            f"`current_stream()` is `{event.stream}`, so the work queued before the block is not waited for "
            "(take the current stream before entering the block)",
            always=True,
        )

    def on_UnorderedNewStream(self, w: FunctionWalker, event: UnorderedNewStream) -> None:
        w.hazard(
            RULE.code,
            event.node,
            "this block runs on a new stream that nothing orders: it does not wait for the work queued "
            "before it, and nothing after it can wait for its work (name the stream, "
            "`s.wait_stream(torch.cuda.current_stream())` before the block, "
            "`torch.cuda.current_stream().wait_stream(s)` after it)",
            always=True,
        )

    def on_WrongStreamWait(self, w: FunctionWalker, event: WrongStreamWait) -> None:
        named, block = show_stream(event.named), show_stream(event.block)
        if event.join:
            what = (
                f"the current stream waits for `{named}` right after the block on `{block}`, and nothing "
                f"joins `{block}`: the work after it can run before the block's work is done"
            )
        else:
            what = (
                f"`{named}` waits for the current stream right before the block on `{block}`, which "
                "does not: the block can read what the current stream has not written yet"
            )
        w.hazard(RULE.code, event.node, f"{what} (did you mean `{block}`?)", always=True)


class StreamFrozenInDeferredCall(Detector):
    """`functools.partial(..., stream=torch.cuda.current_stream())` handed on to run later
    (`deferred_stream`): the stream is the one current when it was made."""

    rule = RULE

    def on_Assign(self, w: FunctionWalker, stmt: ast.Assign) -> None:
        found = deferred_stream(w, stmt)
        if found is None:
            return
        w.hazard(
            RULE.code,
            found.stream,
            f"`{source_text(found.stream)}` is read when `{found.name}` is made, not when it runs: `{found.name}` "
            f"is handed on (line {found.escape_line}) to run later, under whatever stream is current then, while its "
            "kernels launch on this one, which nothing orders with it (read the stream inside the function it calls)",
            always=True,
        )


def _current_stream_fix(w: FunctionWalker, default: ast.Call) -> Fix | None:
    """`torch.cuda.default_stream()` -> `torch.cuda.current_stream()`, in the spelling used."""
    if not isinstance(default.func, ast.Attribute):
        return None  # `default_stream()` imported by name: `current_stream` may not be
    return Fix(
        "unsafe",
        "wait on the stream the work is queued on: `current_stream()`",
        (RenameAttribute(w.st.span(default.func), "current_stream"),),
    )
