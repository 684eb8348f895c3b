"""Which earlier test makes a test fail that passes alone: run it after each one in turn.

A `cuda` test can pass alone and fail in its file's order, when an earlier test leaves state
behind in the process (a graph, a generator's state, a patched entry point, a cuDNN handle).
Seen on an H100 on 2026-12-06: `test_an_lstm_with_dropout_is_not_gl504_inside_its_own_cudnn_call`
failed with `cudaErrorStreamCaptureInvalidated` in `tests/test_replay_guard_cuda.py` and
passed alone. This runs the target alone, then after each test collected before it in its
file (one pytest process per pair), and prints each pair's outcome, so one GPU call names the
test whose leftovers break it.

    python3 scripts/test_order_culprits.py tests/test_replay_guard_cuda.py::test_an_lstm_with_dropout_is_not_gl504_inside_its_own_cudnn_call
"""

from __future__ import annotations

import subprocess
import sys


def _pytest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def _before(target: str) -> list[str]:
    """The tests collected before ``target`` in its file, in the order pytest runs them."""
    listed = _pytest("--collect-only", target.split("::")[0]).stdout.splitlines()
    ids = [line for line in listed if "::" in line]
    if target not in ids:
        raise SystemExit(f"{target} is not collected; collected: {ids}")
    return ids[: ids.index(target)]


def _outcome(*tests: str) -> str:
    result = _pytest(*tests)
    return "passed" if result.returncode == 0 else "FAILED: " + result.stdout.strip().splitlines()[-1]


def main() -> int:
    target = sys.argv[1]
    print(f"alone: {_outcome(target)}")
    culprits = []
    for earlier in _before(target):
        outcome = _outcome(earlier, target)
        print(f"after {earlier.split('::')[-1]}: {outcome}")
        if outcome != "passed":
            culprits.append(earlier)
    print("culprits:", ", ".join(c.split("::")[-1] for c in culprits) or "none alone (several together?)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
