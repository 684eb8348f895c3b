"""The parameterized launcher on a real GPU (marker `cuda`; skipped with the reason elsewhere)."""

from __future__ import annotations

import statistics
import time
import warnings

import pytest

torch = pytest.importorskip("torch", reason="the launcher needs torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the launcher needs a GPU"),
]


def _launcher(fn, *inputs, **kwargs):
    pytest.importorskip("cuda.bindings", reason="cuda-bindings is not installed")
    from graphlint.runtime_sanitizer.launcher import ParameterizedLauncher

    return ParameterizedLauncher(fn, inputs, **kwargs)


class Block(torch.nn.Module):
    def __init__(self, dim=256, heads=4):
        super().__init__()
        self.heads = heads
        self.norm = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(x)


MODELS = {
    "mlp": (
        lambda: torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)).cuda(),
        (64, 256),
    ),
    "transformer_block": (lambda: Block().cuda(), (4, 128, 256)),
    "compiled": (lambda: torch.compile(lambda t: torch.sin(t) * 3 + t), (1 << 16,)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
@torch.inference_mode()
def test_outputs_equal_eager_on_inputs_the_graph_never_saw(name: str) -> None:
    make, shape = MODELS[name]
    fn = make()
    sample = torch.randn(shape, device="cuda")
    before = sample.clone()
    fn(sample)
    launcher = _launcher(fn, sample)
    assert launcher.fallback_reason is None, launcher.fallback_reason
    exact = 0
    previous = None
    for _ in range(20):
        x = torch.randn(shape, device="cuda")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback on a well-formed call
            (out,) = launcher(x)
        expected = fn(x)
        exact += int(torch.equal(out, expected))
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
        if previous is not None:
            kept, kept_value = previous
            assert kept.data_ptr() != out.data_ptr()
            assert torch.equal(kept, kept_value), "a later call overwrote an earlier output"
        previous = (out, out.clone())
    print(f"{name}: {exact}/20 bit-identical to eager")
    assert torch.equal(sample, before)


@torch.inference_mode()
def test_misaligned_input_falls_back_and_stays_correct() -> None:
    fn = lambda t: t * 2 + 1  # noqa: E731
    base = torch.randn((1 << 20) + 4, device="cuda")
    launcher = _launcher(fn, base[: 1 << 20].clone())
    view = base[1 : (1 << 20) + 1]
    with pytest.warns(UserWarning, match="aligned"):
        (out,) = launcher(view)
    torch.testing.assert_close(out, fn(view))


@torch.inference_mode()
def test_per_call_cpu_cost() -> None:
    fn = MODELS["transformer_block"][0]()
    x = torch.randn(4, 128, 256, device="cuda")
    launcher = _launcher(fn, x)
    nodes = len(launcher._nodes)
    for _ in range(20):
        launcher(x)
    torch.cuda.synchronize()
    samples = []
    for _ in range(200):
        start = time.perf_counter()
        launcher(x)
        samples.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    median_us = statistics.median(samples) * 1e6
    print(f"launcher call: {median_us:.1f} us CPU for {nodes} patched nodes")
    assert median_us < 2000
