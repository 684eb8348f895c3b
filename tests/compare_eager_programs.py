"""The `--compare-eager` programs of tests/test_compare_eager_cuda.py, each run as a user runs it
(plainly, and under `graphlint sanitize --compare-eager`):

- ``host_scale``: a sampling temperature read as a Python float inside the captured block; the
  loop changes it after two replays, and the graph keeps dividing by the captured one (the bug);
- ``rebound_input``: a decoder that rebinds its static input attribute to each new batch
  instead of copying into it, so every replay reads the first batch (the bug);
- ``clean``: one graph per batch size captured in a loop (static input and output made per size),
  replayed out of order, with an in-place cache write and a `copy_` into a preallocated output in
  the block: everything refilled as it should be (no finding, bit-identical results);
- ``dropout``: a block that draws random numbers, which `--compare-eager` refuses (GL500).

    python tests/compare_eager_programs.py host_scale|rebound_input|clean|dropout OUT.pt
"""

from __future__ import annotations

import sys

import torch


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.fc1(x))  # first layer
        return self.fc2(h)


def warm_up(fn, *args) -> None:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)


def host_scale(model: Mlp, batches: list) -> list:
    static_x = torch.zeros(4, 16, device="cuda")
    temperature = 1.0
    warm_up(model, static_x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        h = model(static_x)
        probs = torch.softmax(h / temperature, dim=-1)  # the captured temperature
    results = []
    for step, x in enumerate(batches):
        temperature = 1.0 if step < 2 else 0.5
        static_x.copy_(x)
        graph.replay()
        results.append(probs.clone())
    return results


class Decoder:
    def __init__(self, model: Mlp) -> None:
        self.model = model
        self.static_x = torch.zeros(4, 16, device="cuda")
        self.buffers = [self.static_x]  # the graph's input stays allocated: the bug is only the rebinding
        warm_up(model, self.static_x)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.model(self.static_x)

    def step(self, x: torch.Tensor) -> torch.Tensor:
        self.static_x = x  # rebinds the attribute: the graph still reads the first buffer
        self.graph.replay()
        return self.out.clone()


def rebound_input(model: Mlp, batches: list) -> list:
    decoder = Decoder(model)
    decoder.static_x.copy_(batches[0])
    return [decoder.step(x) for x in batches]


def clean(model: Mlp, batches: list) -> list:
    graphs, statics = {}, {}
    cache = torch.zeros(8, 8, device="cuda")
    position = torch.zeros(1, dtype=torch.long, device="cuda")
    for size in (2, 4):
        static_x = torch.zeros(size, 16, device="cuda")
        static_out = torch.empty(size, 8, device="cuda")
        warm_up(model, static_x)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = model(static_x)
            static_out.copy_(y)
            cache[position] = y.sum(dim=0, keepdim=True)  # an in-place write the eager run must undo
        graphs[size], statics[size] = graph, (static_x, static_out)
    results = []
    for step, x in enumerate(batches):
        size = 2 if step % 2 else 4
        static_x, static_out = statics[size]
        static_x.copy_(x[:size])
        position.fill_(step % 8)
        graphs[size].replay()
        results.append(static_out.sum(dim=0))
    results.append(cache.clone())
    return results


def dropout(model: Mlp, batches: list) -> list:
    static_x = torch.zeros(4, 16, device="cuda")
    warm_up(model, static_x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = torch.nn.functional.dropout(model(static_x), p=0.5)
    results = []
    for x in batches:
        static_x.copy_(x)
        graph.replay()
        results.append(y.clone())
    return results


def main(program: str, out: str) -> None:
    torch.manual_seed(0)
    model = Mlp().cuda()
    batches = [torch.randn(4, 16, device="cuda") for _ in range(5)]
    with torch.no_grad():
        results = globals()[program](model, batches)
    torch.cuda.synchronize()
    torch.save([r.cpu() for r in results], out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
