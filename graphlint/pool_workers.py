"""Worker processes for the file phase that never outlive the run that started them.

When the main process of `check --jobs N` dies without shutting its pool down (`kill -9`,
`subprocess.run(timeout=)`, an OOM kill), its workers wait on the task queue forever: each
holds a copy of the queue's write end, so no end-of-file ever comes. Each worker therefore
watches its parent: on Linux the kernel kills it with the parent (`PR_SET_PDEATHSIG`), and
everywhere a daemon thread exits it once its parent is gone (the parent id changes when the
process is re-parented).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor

_POLL_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool whose workers exit when this process dies, however it dies."""
    return ProcessPoolExecutor(max_workers=workers, initializer=die_with_parent, initargs=(os.getpid(),))


def die_with_parent(parent: int) -> None:
    """Run in each worker as it starts: tie its life to the process ``parent``."""
    _kernel_kills_on_parent_death()
    if os.getppid() != parent:  # the parent died before the watch was set up
        os._exit(1)
    threading.Thread(target=_watch, args=(parent,), name="graphlint-parent-watch", daemon=True).start()


def _kernel_kills_on_parent_death() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # the watch thread still ends the worker


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_POLL_SECONDS)
    os._exit(1)
