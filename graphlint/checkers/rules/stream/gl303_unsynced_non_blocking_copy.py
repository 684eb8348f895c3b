"""GL303 unsynced-non-blocking-copy."""

from __future__ import annotations

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.syntax import line_of
from graphlint.checkers.machinery.detectors import Detector
from graphlint.checkers.machinery.flows.stream.stream_flow import UnsyncedHostRead
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL303",
        preview=True,
        preview_reason=(
            "The false ones stored or wrapped the host buffer (not a read) or were ordered by a blocking copy or an event; it reports none now: too few true findings to vouch for the rule."
        ),
        name="unsynced-non-blocking-copy",
        summary=(
            "`y = x.to('cpu', non_blocking=True)` (or `.cpu(non_blocking=True)`, "
            "`host.copy_(x, non_blocking=True)`) read on the host before a synchronisation."
        ),
        why=(
            "A non-blocking device-to-host copy returns at once; the host buffer is filled later. "
            "Reading it before `torch.cuda.synchronize()` or an event's `synchronize()` reads "
            "garbage or stale values."
        ),
        example="""
            import torch

            host = logits.to("cpu", non_blocking=True)
            tokens = host.argmax(-1).tolist()
        """,
        use_instead="""
            import torch

            host = logits.to("cpu", non_blocking=True)
            done = torch.cuda.Event()
            done.record()
            done.synchronize()
            tokens = host.argmax(-1).tolist()
        """,
    )
)


class UnsyncedNonBlockingCopy(Detector):
    rule = RULE

    def on_UnsyncedHostRead(self, w: FunctionWalker, event: UnsyncedHostRead) -> None:
        w.hazard(
            RULE.code,
            event.node,
            f"`{event.name}` is read on the host before the non-blocking copy into it (line {line_of(event.copy)}) is "
            "synchronised",
            always=True,
        )
