"""Room for files nested as deeply as CPython itself accepts.

CPython parses a 400-branch `elif` chain (each `elif` is an `If` inside the previous one's
`orelse`) or a long chain of binary operators, but walking such a tree recursively needs more
Python frames than the default recursion limit gives. Rather than make every walk iterative,
a file whose analysis ran out of frames is analysed again in a thread of its own with a
large stack and a raised limit: the cost is paid only by the rare file that needs it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")

STACK_BYTES = 512 << 20  # the thread's own stack: deep Python recursion also nests C frames
FRAME_LIMIT = 60_000  # recursion limit while it runs (the default is 1,000)


def run_deep(work: Callable[[], _T]) -> _T:
    """``work()`` in a thread with a large stack and recursion limit; its result, or its exception."""
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["result"] = work()
        except BaseException as error:  # handed back to the caller's thread as it was raised
            outcome["error"] = error

    previous_stack = threading.stack_size(STACK_BYTES)
    previous_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous_limit, FRAME_LIMIT))  # interpreter-wide: lowered again below
    try:
        thread = threading.Thread(target=target, name="graphlint-deep-file")
        thread.start()
        thread.join()
    finally:
        threading.stack_size(previous_stack)
        sys.setrecursionlimit(previous_limit)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["result"]  # type: ignore[return-value]
