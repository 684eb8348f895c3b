"""The file phase's worker processes die with the main process of `check --jobs 2`, however
it dies: a `kill -9` of the parent (what `subprocess.run(timeout=)` does) leaves no worker
waiting on the task queue forever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the workers through /proc")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie has exited; its reaper may be slow


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


@linux_only
def test_workers_exit_when_the_parent_is_killed(tmp_path: Path) -> None:
    body = "".join(f"def f{i}(x):\n    y = x + {i}\n    return y.item()\n\n" for i in range(400))
    for index in range(60):
        (tmp_path / f"m{index}.py").write_text(body)
    parent = subprocess.Popen(
        [sys.executable, "-m", "graphlint", "check", "--no-cache", "--jobs", "2", "."],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers: list[int] = []
    try:
        assert _wait_for(lambda: len(_children(parent.pid)) >= 2, 120), "the pool never started"
        workers = _children(parent.pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert _wait_for(lambda: not any(_alive(pid) for pid in workers), 10), "workers outlived their parent"
    finally:
        parent.kill()
        parent.wait()
        for pid in workers:  # a failing run's orphans
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
