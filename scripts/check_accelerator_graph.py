"""GPU check: a torch.accelerator.Graph capture under the replay guard is refused (GL500 at its
line) and its replays give the same results as without the guard. Prints both and the findings.

    python3 scripts/check_accelerator_graph.py
"""

from __future__ import annotations

import torch

from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard


def program() -> list[float]:
    """Capture `y = x * 2 + 1` with torch.accelerator.Graph and replay it on three inputs."""
    x = torch.zeros(1024, device="cuda")
    stream = torch.Stream()
    with torch.cuda.stream(torch.cuda.Stream()):
        y = x * 2 + 1  # warm-up off the default stream
    torch.cuda.synchronize()
    graph = torch.accelerator.Graph()
    with stream, graph:
        y = x * 2 + 1
    results = []
    for value in (1.0, 2.0, 3.0):
        x.fill_(value)
        graph.replay()
        torch.cuda.synchronize()
        results.append(float(y.sum()))
    return results


def main() -> int:
    if not hasattr(torch, "accelerator") or not hasattr(torch.accelerator, "Graph"):
        print(f"torch {torch.__version__} has no torch.accelerator.Graph: nothing to check")
        return 0
    plain = program()
    guard = ReplayGuard().install()
    try:
        guarded = program()
    finally:
        guard.uninstall()
    print("torch", torch.__version__, "plain", plain, "guarded", guarded, "identical", plain == guarded)
    print("graphs seen", guard.graphs.seen, "refused", len(guard.graphs.refused))
    for finding in guard.findings:
        print(f"{finding.path}:{finding.line}: {finding.code} {finding.message}")
    return 0 if plain == guarded else 1


if __name__ == "__main__":
    raise SystemExit(main())
