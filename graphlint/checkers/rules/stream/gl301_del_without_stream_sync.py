"""GL301 del-without-stream-sync.

Two behaviours. In the default set, the releases the function shows whole
(`stream_certainty`): memory this function made on the current stream, used by a side
stream, then dropped (`del x`, `x = None`, a rebinding) with nothing but forks between the use
and the drop and no `record_stream` anywhere (the activation-offload slip); and a tensor a
class makes on its side stream (`self.next_input = x.cuda(non_blocking=True)` under
`torch.cuda.stream(self.stream)`) handed to the current stream without `record_stream`, where
that stream never waits for the current one before it allocates again (apex's data
prefetcher, fixed in d5e2bb4b); and `t.data = ...` in a side stream's block that read `t`,
forked from the current stream before it (fairscale's FSDP gradient hook, fixed in a0fe832b);
storage a class grows on its side stream in one method (joined into the current stream after)
and shrinks to nothing in another with nothing ordering the free (`side_storage`: fairscale's
`free_storage_(p._full_param_padded)`, fixed in 196898d6); and a tensor whose memory is swapped
out (`.data =`, storage resized to 0, or a same-file helper doing so) while an asynchronous send
of it is still in flight (`pending_sends`: Megatron-LM's `deallocate_output_tensor` after an
overlapped P2P send, fixed in 260cba71).
In preview: the other releases the flow finds unordered,
which on real code are mostly ordered by a caller, a callee or a `record_stream` on another
name of the same memory.
"""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.core.syntax import line_of
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.machinery.flows.stream.pending_sends import SwappedBeforeWait
from graphlint.checkers.machinery.flows.stream.stream_flow import (
    MAIN,
    DataSwappedInUse,
    HandedWithoutRecord,
    ReleasedInUse,
    SideStorageFreed,
    show_stream,
)
from graphlint.checkers.rules.stream.common import rebinds, record_stream_fix
from graphlint.findings import Fix
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL301",
        preview_behaviour=(
            "the other releases the flow finds unordered: the end of a local's scope, memory a side "
            "stream made and the current stream dropped, releases with a join, event or helper call "
            "between the use and the release. The false ones are orderings done in another file or "
            "through an executor, syncs and record_stream the flow does not tie to the release, "
            "split views kept alive by their siblings, and branches tied by flags."
        ),
        default_set_note=(
            "The default mode reports the releases the function shows whole: memory it made on the "
            "current stream, read or written by a side stream, dropped with only forks between the "
            "use and the drop and no `record_stream` in the function; and tensors a class makes on "
            "its side stream and hands to the current stream without `record_stream`, when that "
            "stream never waits for the current one (apex d5e2bb4b, the data prefetcher); and "
            "`t.data = ...` in a side stream's block that read `t`, forked from the current stream "
            "(fairscale a0fe832b, the FSDP gradient hook); storage a class grows on a side stream "
            "and joins into the current stream in one method, and shrinks to nothing in another "
            "that orders nothing (fairscale 196898d6, `free_storage_`); and `.data =` (or storage "
            "resized to nothing, or a same-file helper doing so) on a tensor an asynchronous send was "
            "given, before its handle is waited (Megatron-LM 260cba71, `deallocate_output_tensor`)."
        ),
        name="del-without-stream-sync",
        fix="unsafe",
        summary=(
            "`del x`, `x = None`, rebinding `x`, `x.data = ...`, or the end of scope of a local `x`, where `x` was "
            "used on another stream (`with torch.cuda.stream(s):`) and nothing since ordered that "
            "use before the release (`current_stream().wait_stream(s)`, `s.synchronize()`, "
            "`torch.cuda.synchronize()`, an event recorded on `s` and waited on, or "
            "`x.record_stream(s)`)."
        ),
        why=(
            "The caching allocator recycles a freed block on the stream that allocated it, without "
            "waiting for other streams. If `s` still reads or writes `x`, the next allocation on "
            "the current stream gets the same memory while `s` is using it."
        ),
        example="""
            import torch

            x = torch.randn(n, device="cuda")
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                y = x * 2
            del x
        """,
        use_instead="""
            import torch

            x = torch.randn(n, device="cuda")
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                y = x * 2
                x.record_stream(side)
            del x
        """,
    )
)


class DelWithoutStreamSync(Detector):
    rule = RULE

    def on_ReleasedInUse(self, w: FunctionWalker, event: ReleasedInUse) -> None:
        where = f"at the end of `{event.function}`" if event.scope_end else "here"
        user = "the current stream" if event.use_stream == MAIN else f"stream `{event.use_stream}`"
        w.hazard(
            RULE.code,
            event.node,
            f"`{event.name}` is released {where} while {user} may still use it (line "
            f"{line_of(event.use_node)}): the allocator can hand its memory to the next allocation on "
            f"`{show_stream(event.alloc_stream)}`",
            fix=_release_fix(w, event),
            always=True,
            preview=not event.certain,
        )

    def on_HandedWithoutRecord(self, w: FunctionWalker, event: HandedWithoutRecord) -> None:
        name, side = event.name, event.side
        w.hazard(
            RULE.code,
            event.node,
            f"`{name}` was allocated on `{side}` and is handed to the current stream without "
            f"`{name}.record_stream(torch.cuda.current_stream())`: once it is freed, the allocator "
            f"can reuse it on `{side}` while the current stream still reads it",
            fix=record_stream_fix(w, event.node, name, "torch.cuda.current_stream()"),
            always=True,
            preview=not event.certain,
        )

    def on_DataSwappedInUse(self, w: FunctionWalker, event: DataSwappedInUse) -> None:
        name, stream = event.name, event.stream
        w.hazard(
            RULE.code,
            event.node,
            f"`{name}.data` is replaced here while stream `{stream}` may still read the old memory (line "
            f"{getattr(event.read, 'lineno', event.node.lineno)}): it is freed now, and the allocator can "
            f"hand it to the next allocation on the stream that made it (`{name}.record_stream({stream})` "
            "before the first read in the block tells it to wait)",
            always=True,
            preview=not event.certain,
        )

    def on_SideStorageFreed(self, w: FunctionWalker, event: SideStorageFreed) -> None:
        name, stream = event.name, event.stream
        w.hazard(
            RULE.code,
            event.node,
            f"`{name}`'s storage is freed here without `{name}.record_stream(torch.cuda.current_stream())`: "
            f"`{event.allocator}` allocates it on `{stream}` (line {event.line}) and hands it to the current "
            f"stream, so the allocator can give it to the next allocation on `{stream}` while the current "
            "stream still reads it",
            always=True,
        )

    def on_SwappedBeforeWait(self, w: FunctionWalker, event: SwappedBeforeWait) -> None:
        w.hazard(
            RULE.code,
            event.node,
            f"`{event.name}`'s memory is swapped out here (`{event.how}`) while the asynchronous call at "
            f"line {event.line} that was given it may still read it: its handle is waited only later, so "
            "the allocator can hand the old memory to the next allocation while the communication runs "
            "(wait the handle before the swap)",
            always=True,
        )


def _release_fix(w: FunctionWalker, event: ReleasedInUse) -> Fix | None:
    """Record the name the side stream used (`x` in `x.add_(1)`), not the released one, which
    may be a holder of it (`pair = (x, n)` ... `pair = None`)."""
    used = event.use_node
    name = used.id if isinstance(used, ast.Name) else source_text(used)
    if (name != event.name and not isinstance(used, ast.Name)) or rebinds(event.use_statement, name):
        return None
    release = None if event.scope_end else event.node
    return record_stream_fix(w, event.use_statement, name, event.use_stream, release)
