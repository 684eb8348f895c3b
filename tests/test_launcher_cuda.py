"""The parameterized launcher on a real GPU (marker `cuda`; skipped with the reason elsewhere)."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch", reason="the launcher needs torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the launcher needs a GPU"),
]


def _launcher(fn, *inputs, **kwargs):
    pytest.importorskip("cuda.bindings", reason="cuda-bindings is not installed")
    from graphlint.launcher.launcher import ParameterizedLauncher

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
def test_a_call_issues_one_update_per_patched_node_and_copies_nothing() -> None:
    """The per-call contract of host-side updates (its cost is measured by
    benchmarks/launcher_speed.py): exactly one driver update per patched node, and no copy into
    or out of the graph's static buffers."""
    fn = MODELS["transformer_block"][0]()
    x = torch.randn(4, 128, 256, device="cuda")
    launcher = _launcher(fn, x, updates="host")
    assert launcher._direct is not None and launcher._nodes
    calls = []
    real = launcher._direct
    launcher._direct = lambda *args: calls.append(args[1]) or real(*args)
    static = [t.clone() for t in launcher.outputs]
    launcher(torch.randn_like(x))
    assert sorted(calls) == sorted(node.handle_int for node in launcher._nodes)
    assert all(torch.equal(a, b) for a, b in zip(static, launcher.outputs, strict=True))
    assert launcher.inputs == [None] and launcher.freed_input_bytes == x.numel() * x.element_size()


@torch.inference_mode()
def test_a_call_that_must_copy_gets_a_static_input_again() -> None:
    """The build frees the static input it re-points (the memory the launcher saves); a call
    the launcher must serve by copying (here a less aligned input, GL502) allocates one again,
    re-points the kernels at it, and still gives eager's result, as does the next call."""
    fn = MODELS["transformer_block"][0]()
    x = torch.randn(4, 128, 256, device="cuda")
    launcher = _launcher(fn, x)
    assert launcher.fallback_reason is None and launcher.inputs == [None]
    shifted = torch.randn(x.numel() + 1, device="cuda")[1:].view_as(x)
    with pytest.warns(UserWarning, match="aligned"):
        (out,) = launcher(shifted)
    torch.testing.assert_close(out, fn(shifted))
    assert launcher.inputs[0] is not None and launcher.inputs[0].data_ptr() % 512 == 0
    fresh = torch.randn_like(x)
    torch.testing.assert_close(launcher(fresh)[0], fn(fresh))


def _training_step(model, optimizer):
    def step(x, y):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def _train_setup():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, capturable=True)
    return model, optimizer, _training_step(model, optimizer)


def _state(model, optimizer):
    return [*model.parameters(), *(v for p in model.parameters() for v in optimizer.state[p].values())]


def test_training_step_with_a_capturable_optimizer_equals_the_graph_recipe_and_the_build_changes_nothing() -> None:
    """The reference is PyTorch's own recipe (static inputs, `copy_`, replay) on a twin: the same
    kernels, so bit for bit. (Both depart from an eager twin after the first update on this
    torch 2.11 / H200: the captured capturable-Adam step is not bitwise the eager one.)"""
    import copy

    model, optimizer, step = _train_setup()
    x, y = torch.randn(32, 64, device="cuda"), torch.randn(32, 1, device="cuda")
    with pytest.raises(Exception, match="run one eager step first"):
        _launcher(step, x, y, module=model, optimizer=optimizer)
    step(x, y)  # the optimizer creates its state lazily
    twin, twin_optimizer = copy.deepcopy((model, optimizer))
    twin_step = _training_step(twin, twin_optimizer)

    before = [t.detach().clone() for t in _state(model, optimizer)]
    rng = torch.cuda.get_rng_state()
    launcher = _launcher(step, x, y, module=model, optimizer=optimizer)
    assert all(torch.equal(a, b) for a, b in zip(before, _state(model, optimizer), strict=True)), "the build trained"
    assert torch.equal(rng, torch.cuda.get_rng_state())
    assert launcher.fallback_reason is None, launcher.fallback_reason

    static_x, static_y = x.clone(), y.clone()
    saved = [t.detach().clone() for t in _state(twin, twin_optimizer)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            twin_step(static_x, static_y)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = twin_step(static_x, static_y)
    with torch.no_grad():
        for tensor, copied in zip(_state(twin, twin_optimizer), saved, strict=True):
            tensor.copy_(copied)

    for _ in range(10):
        xs, ys = torch.randn(32, 64, device="cuda"), torch.randn(32, 1, device="cuda")
        (loss,) = launcher(xs, ys)
        static_x.copy_(xs)
        static_y.copy_(ys)
        graph.replay()
        assert torch.equal(loss, static_loss)
    for mine, theirs in zip(_state(model, optimizer), _state(twin, twin_optimizer), strict=True):
        assert torch.equal(mine, theirs)
    print("training step: 10 losses, parameters and optimizer state bit-identical to the graph recipe")


@torch.inference_mode()
def test_an_input_inside_memory_the_graph_writes_is_gl507_and_falls_back() -> None:
    fn = MODELS["mlp"][0]()
    x = torch.randn(64, 256, device="cuda")
    launcher = _launcher(fn, x)
    own = launcher.outputs[0]  # the graph's static output: in its private pool
    wanted = fn(own.clone())
    with pytest.warns(UserWarning, match="GL507"):
        (out,) = launcher(own)
    torch.testing.assert_close(out, wanted)
    assert [f.code for f in launcher.report.findings if f.code == "GL507"] == ["GL507"]
    (fine,) = launcher(x)  # a tensor the graph does not write: re-pointed again
    torch.testing.assert_close(fine, fn(x))


@torch.inference_mode()
def test_an_input_only_a_memcpy_reads_is_copied_and_the_rest_re_pointed() -> None:
    def fn(x, w):
        staged = torch.empty_like(x)
        staged.copy_(x)  # a device-to-device memcpy node reads input 0
        return staged * 2 + w

    x, w = torch.randn(1 << 16, device="cuda"), torch.randn(1 << 16, device="cuda")
    launcher = _launcher(fn, x, w)
    assert launcher.fallback_reason is None, launcher.fallback_reason
    assert "memcpy" in launcher.pinned.get("input 0", ""), launcher.pinned
    assert "input 1" not in launcher.pinned
    for _ in range(5):
        a, b = torch.randn_like(x), torch.randn_like(w)
        (out,) = launcher(a, b)
        assert torch.equal(out, fn(a, b))


@torch.inference_mode()
def test_bf16_convolutions_through_cudnn_are_re_pointed() -> None:
    torchvision = pytest.importorskip("torchvision", reason="torchvision is not installed")
    model = torchvision.models.resnet18().cuda().to(torch.bfloat16).eval()
    x = torch.randn(4, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    launcher = _launcher(model, x)
    assert launcher.fallback_reason is None, launcher.fallback_reason
    low = [w for w in launcher.report.input_slots if w.width == 4]
    for _ in range(3):
        fresh = torch.randn_like(x)
        (out,) = launcher(fresh)
        assert torch.equal(out, model(fresh))
    print(f"resnet18 bf16: {len(launcher._nodes)} patched nodes, {len(low)} low-half input fields")


class FanOut(torch.nn.Module):
    """The input read by ``reads`` kernels: ``reads + 1`` patched nodes."""

    def __init__(self, reads: int) -> None:
        super().__init__()
        self.reads = reads

    def forward(self, x):
        acc = x * 1.0
        for i in range(self.reads - 1):
            acc = acc + x * float(i + 2)
        return acc


def _device_launcher(fn, x):
    """Device-side updates need the CUDA toolkit's nvcc and libcudadevrt at run time."""
    launcher = _launcher(fn, x, updates="device", copy_when_cheaper=False)
    if launcher._updater is None:
        pytest.skip(f"device-side updates are not available here: {launcher.update_note}")
    return launcher


@torch.inference_mode()
def test_device_side_updates_re_point_every_node_with_one_launch_and_no_driver_call() -> None:
    """32 patched nodes, re-pointed by one updater launch a call: no host-side driver update,
    every result right, and every output stays the caller's (a later call never writes it)."""
    fn = FanOut(31)
    x = torch.randn(4096, device="cuda")
    launcher = _device_launcher(fn, x)
    assert launcher.fallback_reason is None, launcher.fallback_reason
    assert len(launcher._nodes) == 32 and all(node.on_device for node in launcher._nodes)
    calls, launches = [], []
    real_direct, real_launch = launcher._direct, launcher._updater.launch
    launcher._direct = lambda *args: calls.append(args) or real_direct(*args)
    launcher._updater.launch = lambda addresses: launches.append(list(addresses)) or real_launch(addresses)
    previous = None
    for _ in range(300):
        a = torch.randn_like(x)
        (out,) = launcher(a)
        assert torch.equal(out, fn(a))
        if previous is not None:
            assert torch.equal(previous[0], previous[1]), "a later call overwrote an earlier output"
        previous = (out, out.clone())
    assert not calls, "no host-side driver update when every node is device-updatable"
    assert launches and launches[-1] == [a.data_ptr(), out.data_ptr()]


@torch.inference_mode()
def test_auto_updates_take_the_device_from_the_threshold_on_and_the_host_below_it() -> None:
    from graphlint.launcher.launcher import DEVICE_THRESHOLD

    x = torch.randn(4096, device="cuda")
    many = _launcher(FanOut(31), x, copy_when_cheaper=False)
    few = _launcher(FanOut(DEVICE_THRESHOLD - 2), x, copy_when_cheaper=False)
    assert len(few._nodes) < DEVICE_THRESHOLD and few._updater is None, few.update_note
    if many._updater is None:
        pytest.skip(f"device-side updates are not available here: {many.update_note}")
    for launcher, fn in ((many, FanOut(31)), (few, FanOut(DEVICE_THRESHOLD - 2))):
        a = torch.randn_like(x)
        assert torch.equal(launcher(a)[0], fn(a))
        assert launcher.fallback_reason is None


@torch.inference_mode()
def test_a_small_input_many_kernels_read_is_copied_in_and_a_large_one_re_pointed() -> None:
    """16 KB read by 79 kernels: one copy costs less than re-pointing 79 nodes, so the launcher
    copies it (and says so) while still re-pointing the output; 64 MB read by the same kernels
    is re-pointed. Results are right either way."""
    fn = FanOut(79)
    small, large = torch.randn(4096, device="cuda"), torch.randn(1 << 24, device="cuda")
    copying = _launcher(fn, small)
    assert "input 0" in copying.copied and "cheaper to copy: 79 kernels" in copying.copied["input 0"]
    assert not copying.pinned and len(copying._nodes) == 1  # the output's node only
    repointing = _launcher(fn, large)
    assert not repointing.copied and len(repointing._nodes) == 80
    for launcher, x in ((copying, small), (repointing, large)):
        a = torch.randn_like(x)
        (out,) = launcher(a)
        assert torch.equal(out, fn(a)) and launcher.fallback_reason is None


@torch.inference_mode()
def test_device_updates_follow_the_callers_stream() -> None:
    """The updater is launched on the current stream, the replay's: on a side stream too."""
    fn = FanOut(15)
    x = torch.randn(4096, device="cuda")
    launcher = _device_launcher(fn, x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        a = torch.randn_like(x)
        outs = [launcher(a)[0] for a in (a, a * 2, a * 3)]
        expected = [fn(a * k) for k in (1, 2, 3)]
    torch.cuda.current_stream().wait_stream(side)
    assert all(torch.equal(o, e) for o, e in zip(outs, expected, strict=True))


@torch.inference_mode()
def test_host_and_device_updates_give_the_same_bits() -> None:
    fn = MODELS["transformer_block"][0]()
    x = torch.randn(4, 128, 256, device="cuda")
    host, device = _launcher(fn, x, updates="host"), _device_launcher(fn, x)
    assert host._updater is None
    for _ in range(3):
        a = torch.randn_like(x)
        assert torch.equal(host(a)[0], device(a)[0])


@torch.inference_mode()
def test_bf16_gemm_kernels_launched_with_extra_are_re_pointed_and_the_output_is_not_cloned() -> None:
    """cuBLAS's nvjet kernels (bf16 on the H200) take their arguments as one packed `extra`
    buffer; the scan reads it, so the final GEMM writes straight into the caller's new output."""
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 128))
    model = model.cuda().to(torch.bfloat16).eval()
    x = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    launcher = _launcher(model, x)
    if not any(node.extra for node in launcher._capture.snapshot.nodes):
        pytest.skip("cuBLAS launched no kernel with `extra` on this device")
    assert launcher.fallback_reason is None, launcher.fallback_reason
    assert "input 0" not in launcher.pinned, launcher.pinned
    if launcher._ordering is not None:  # else the output is cloned (UNATTRIBUTED_OUTPUT), by design
        assert launcher.pinned == {}, launcher.pinned
    for _ in range(3):
        fresh = torch.randn_like(x)
        (out,) = launcher(fresh)
        torch.testing.assert_close(out, model(fresh), rtol=2e-2, atol=2e-2)


@torch.inference_mode()
def test_an_intermediate_in_the_outputs_block_is_not_re_pointed() -> None:
    """Batch 1: every 4 KiB intermediate takes turns in the same blocks, one of them the output's.
    Only the nodes after the output's storage was allocated move with it."""
    layers = [layer for _ in range(4) for layer in (torch.nn.Linear(1024, 1024), torch.nn.GELU())]
    model = torch.nn.Sequential(*layers).cuda().eval()
    x = torch.randn(1, 1024, device="cuda")
    launcher = _launcher(model, x)
    assert launcher.fallback_reason is None, launcher.fallback_reason
    assert launcher._ordering is not None
    born = next(r.born for r in launcher._ordering.regions if r.name == "output0")
    assert born > 0
    assert all(node.index >= born for node in launcher._nodes if any(s.role == "output" for s in node.slots))
    assert len(launcher._nodes) <= 3, [node.index for node in launcher._nodes]
    for _ in range(3):
        fresh = torch.randn_like(x)
        torch.testing.assert_close(launcher(fresh)[0], model(fresh), rtol=1e-4, atol=1e-4)


@torch.inference_mode()
def test_without_an_attributed_capture_every_output_is_cloned_and_no_weight_changes(monkeypatch) -> None:
    """timm's levit_128s in bfloat16 (an H100, 2026-12-05): its attributed capture differed from
    the plain one, intermediates in the output's block were re-pointed with the output, wrote past
    the caller's smaller tensor and changed a weight. With no attribution, outputs are cloned."""
    from graphlint.runtime_sanitizer.capture import two_captures

    monkeypatch.setattr(two_captures, "capture_attributed", lambda *args, **kwargs: None)
    layers = [layer for _ in range(4) for layer in (torch.nn.Linear(1024, 1024), torch.nn.GELU())]
    model = torch.nn.Sequential(*layers).cuda().eval()
    before = [p.clone() for p in model.parameters()]
    x = torch.randn(1, 1024, device="cuda")
    launcher = _launcher(model, x)
    assert launcher._ordering is None and launcher.fallback_reason is None, launcher.fallback_reason
    assert "no attributed capture" in launcher.pinned.get("output 0", ""), launcher.pinned
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    for _ in range(3):
        fresh = torch.randn_like(x)
        torch.testing.assert_close(launcher(fresh)[0], model(fresh), rtol=1e-4, atol=1e-4)
