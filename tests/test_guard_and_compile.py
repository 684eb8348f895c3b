"""The sanitizer must not change what runs: torch.compile still compiles under the guard."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_dynamo_compiles_frames_while_the_replay_guard_is_installed() -> None:
    from torch._dynamo.testing import CompileCounter

    from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard

    counter = CompileCounter()

    @torch.compile(backend=counter, fullgraph=True)
    def step(x):
        return x.sin() + 1

    guard = ReplayGuard().install()
    try:
        out = step(torch.ones(3))
    finally:
        guard.uninstall()
    assert counter.frame_count == 1, "a dispatch mode without ignore_compile_internals makes Dynamo skip the frame"
    assert torch.equal(out, torch.ones(3).sin() + 1)
