"""The `--poison` programs of tests/test_poison_cuda.py, each run as a user runs it (plainly,
and under `graphlint sanitize --poison`): a padded batch whose graph averages a loss over every
row (the stale rows of a short batch reach the loss: the bug), and its twin that reads only the
live rows of a per-row output (padding stale by design: no finding, bit-identical results).

    python tests/poison_programs.py stale_loss|live_rows OUT.pt
"""

from __future__ import annotations

import sys

import torch

BATCHES = [8, 8, 8, 5, 8, 3, 8]


def main(program: str, out: str) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).cuda()
    data = [(torch.randn(n, 16, device="cuda"), torch.randn(n, 4, device="cuda")) for n in BATCHES]
    static_x = torch.zeros(8, 16, device="cuda")
    static_t = torch.zeros(8, 4, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(2):  # warm-up on a side stream, as torch.cuda.graphs' docs do
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_y = model(static_x)
        static_loss = (static_y - static_t).pow(2).mean()  # over all 8 rows, padding included
    results = []
    for x, t in data:
        static_x[: len(x)].copy_(x)  # only the live rows are refilled
        static_t[: len(t)].copy_(t)
        graph.replay()
        if program == "stale_loss":
            results.append(static_loss.clone())
        else:
            results.append((static_y[: len(x)] - t).pow(2).mean())
    torch.cuda.synchronize()
    torch.save(torch.stack(results).cpu(), out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
