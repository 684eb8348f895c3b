"""The guard's watch on `torch.accelerator.Graph` (torch 2.13; needs torch).

The device-generic graph captures through the accelerator's own graph class in C++, past the
`torch.cuda.graph` and `CUDAGraph` entry points the guard patches: none of its analyses sees
such a capture or its replays (unless torch's lifecycle hooks show it, `lifecycle_hooks`:
then it is analysed like any other). Rather than let a run that captured one read as clean, the
guard counts each capture and refuses it (GL500, at the user's line): the capture and its
replays go on unchanged. Where torch has no such class, nothing is installed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

REASON = (
    "captured with torch.accelerator.Graph, which records through the device's own graph class "
    "past the entry points the sanitizer watches: not analysed (capture it with torch.cuda.graph "
    "or CUDAGraph to have it checked)"
)


class AcceleratorGraphWatch:
    """Wraps `torch.accelerator.Graph.capture_end`: each finished capture is reported to ``seen``."""

    def __init__(self, seen: Callable[[], None], ended: Callable[[], int] = lambda: 0) -> None:
        self._seen = seen
        self._ended = ended  # captures the guard saw end: one during capture_end was analysed
        self._saved: tuple[Any, Any] | None = None

    def install(self, torch: Any) -> None:
        graph_cls: Any = getattr(getattr(torch, "accelerator", None), "Graph", None)
        original = getattr(graph_cls, "capture_end", None)
        if graph_cls is None or original is None:
            return
        seen, ended = self._seen, self._ended

        @functools.wraps(original)
        def capture_end(graph: Any, *args: Any, **kwargs: Any) -> Any:
            before = ended()
            result = original(graph, *args, **kwargs)
            if ended() == before:  # torch's lifecycle hooks showed the guard none: not seen into
                seen()  # after the capture ended: a failed one raised above and is the program's error
            return result

        self._saved = (graph_cls, original)
        graph_cls.capture_end = capture_end

    def uninstall(self) -> None:
        if self._saved is not None:
            graph_cls, original = self._saved
            graph_cls.capture_end = original
            self._saved = None
