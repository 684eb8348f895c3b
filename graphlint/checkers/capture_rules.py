"""GL1xx: code that must not run inside a CUDA graph capture.

Each rule is declared here with its documentation, and its detector runs on every
function during the file phase, producing candidate hazards. Whether a candidate is a
finding is decided project-wide: it must sit lexically in a capture region or in a
function reachable from one (`graphlint.checkers.project`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from graphlint.checkers import types as T
from graphlint.checkers.model import COMPILE, GRAPH
from graphlint.checkers.names import source_text
from graphlint.registry import Rule, declare

if TYPE_CHECKING:
    from graphlint.checkers.summarize import FunctionWalker

declare(
    Rule(
        code="GL101",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 45 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="host-sync-in-capture",
        summary=(
            "`.item()`, `.tolist()`, `.cpu()`, `.numpy()`, `.to('cpu')`, "
            "`torch.cuda.synchronize()`, `Stream.synchronize()`, `Event.synchronize()`, "
            "`Event.query()`, `float()`/`int()`/`bool()` of a tensor, `torch.equal`/"
            "`torch.allclose`, and printing, formatting or logging a tensor, in code that runs "
            "inside a CUDA graph capture (directly or through calls)."
        ),
        why=(
            "Each of these waits for the device and reads device memory on the host. During "
            "stream capture nothing has executed yet, so CUDA rejects the sync "
            "(cudaErrorStreamCaptureUnsupported) and the capture is invalidated. Under "
            "torch.compile's CUDA graphs the sync forces a graph break and the function runs "
            "partly or wholly without a graph."
        ),
        example="""
            with torch.cuda.graph(g):
                loss = model(static_x).mean()
                if_nan = loss.item()  # host sync: the capture fails
        """,
        use_instead="""
            with torch.cuda.graph(g):
                loss = model(static_x).mean()
            g.replay()
            value = loss.item()  # read after replay, outside the capture
        """,
    )
)
declare(
    Rule(
        code="GL102",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 7 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="data-dependent-control-flow",
        summary=(
            "`if`, `while`, `assert` or a conditional expression whose test is a tensor "
            "(`if x.sum() > 0:`, `if torch.any(m):`, `while err > tol:`) in capture."
        ),
        why=(
            "Python must read the tensor to choose a branch: a host sync that fails the "
            "capture. Where it does not fail, the branch taken at capture is frozen into the "
            "graph and every replay takes it, whatever the data says."
        ),
        example="""
            with torch.cuda.graph(g):
                y = model(x)
                if y.abs().max() > 10:
                    y = y / 10
        """,
        use_instead="""
            with torch.cuda.graph(g):
                y = model(x)
                scale = torch.where(y.abs().amax() > 10, 0.1, 1.0)
                y = y * scale
        """,
    )
)
declare(
    Rule(
        code="GL103",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 9 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="dynamic-shape-op-in-capture",
        summary=(
            "Operations whose output size depends on the data: `nonzero`, `torch.unique`, "
            "`masked_select`, boolean-mask indexing `x[mask]`, one-argument `torch.where`, "
            "`repeat_interleave` with tensor repeats and no `output_size`, in capture."
        ),
        why=(
            "The output shape must be known on the host to allocate it, so these sync; a graph "
            "also freezes the size seen at capture, so later replays silently drop or invent "
            "elements."
        ),
        example="""
            with torch.cuda.graph(g):
                idx = scores.nonzero()
                kept = x[scores > 0]
        """,
        use_instead="""
            with torch.cuda.graph(g):
                idx = scores.nonzero_static(size=max_items)
                kept = torch.where(scores > 0, x, 0)
        """,
    )
)
declare(
    Rule(
        code="GL104",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 7 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="host-to-device-copy-in-capture",
        summary=(
            "`torch.tensor(...)`, `torch.as_tensor`, `torch.from_numpy` onto the GPU, or "
            "`.cuda()`/`.to('cuda')` of host data, in capture."
        ),
        why=(
            "The host value is copied once, at capture, and baked into the graph: every "
            "replay reuses it. Copies from pageable host memory also fail the capture."
        ),
        example="""
            with torch.cuda.graph(g):
                scale = torch.tensor([lr], device="cuda")
                out = x * scale
        """,
        use_instead="""
            static_scale = torch.tensor([lr], device="cuda")
            with torch.cuda.graph(g):
                out = x * static_scale
            static_scale.fill_(new_lr)  # update before replay
        """,
    )
)
declare(
    Rule(
        code="GL105",
        preview=True,
        preview_reason=(
            "On the real-code corpus (benchmarks/corpus: vLLM, SGLang, Megatron-core, TransformerEngine, DeepSpeed, tensordict, torchrl, torchtitan, torchao; 10,640 files) it reported 1 finding, not a hazard: a test model's call counter that the test reads on purpose to prove replay skips Python. 0 of 1 is below the 90% bar, and one finding is too few to vouch for the rule."
        ),
        name="host-state-frozen-in-capture",
        summary=(
            "Calls into `time`, `random` and `numpy.random`, and augmented assignment to Python "
            "state (`self.step += 1`, global counters), in capture."
        ),
        why=(
            "Host code runs once, while capturing. Every replay reuses the value it had then: "
            "the clock never moves, the random draw never changes, the counter stays at one."
        ),
        example="""
            def forward(self, x):
                self.calls += 1
                noise = random.random()
                return x * noise
        """,
        use_instead="""
            def forward(self, x):
                self.calls_t += 1  # a device tensor: updated on every replay
                noise = torch.rand((), device=x.device)
                return x * noise
        """,
    )
)
declare(
    Rule(
        code="GL106",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 7 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="non-capturable-optimizer-step",
        fix="unsafe",
        summary=(
            "`opt.step()` in capture where `opt` is a torch optimizer built without "
            "`capturable=True`; `GradScaler.step()`/`update()`; `clip_grad_norm_(..., "
            "error_if_nonfinite=True)`."
        ),
        why=(
            "These keep step counters on the host or read tensors to decide what to do. "
            "PyTorch refuses to capture a non-capturable optimizer step; GradScaler and the "
            "non-finite check sync on every call."
        ),
        example="""
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            with torch.cuda.graph(g):
                loss = model(x).sum()
                loss.backward()
                opt.step()
        """,
        use_instead="""
            opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True)
            with torch.cuda.graph(g):
                loss = model(x).sum()
                loss.backward()
                opt.step()
        """,
    )
)
declare(
    Rule(
        code="GL107",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 4 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="autocast-cache-with-graphs",
        fix="safe",
        summary=(
            "`torch.autocast`, `torch.amp.autocast` or `torch.cuda.amp.autocast` without "
            "`cache_enabled=False` inside a capture, around a capture, or around a call of a "
            "`make_graphed_callables` result."
        ),
        why=(
            "Autocast caches the low-precision casts of weights for the life of the context. "
            "A graph captured under that cache reads cast tensors the cache owns; once the "
            "context exits they are freed and replays read freed or stale memory."
        ),
        example="""
            with torch.autocast("cuda", dtype=torch.bfloat16):
                with torch.cuda.graph(g):
                    out = model(static_x)
        """,
        use_instead="""
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                with torch.cuda.graph(g):
                    out = model(static_x)
        """,
    )
)
declare(
    Rule(
        code="GL108",
        preview=True,
        preview_reason=(
            "On the real-code corpus (benchmarks/corpus: vLLM, SGLang, Megatron-core, TransformerEngine, DeepSpeed, tensordict, torchrl, torchtitan, torchao; 10,640 files), 0 of 30 findings were real: the warm-up was done by earlier calls guarded by a counter or flag, by a helper or another method, inside a stream context the analysis did not recognise (`functools.partial(torch.cuda.stream, s)`, vLLM's `graph_capture()`), or the captured work was host-only."
        ),
        name="capture-without-warmup",
        severity="warning",
        summary=(
            "A `torch.cuda.graph` capture of work that was not run before, in the same scope "
            "(or class), on a side stream (`with torch.cuda.stream(s):`)."
        ),
        why=(
            "The first run of a model initialises lazily: cuBLAS handles and workspaces, "
            "autotuning, allocator growth, DDP buckets. Inside a capture that work either fails "
            "or is recorded into the graph. PyTorch's documentation warms up on a side stream "
            "for that reason."
        ),
        example="""
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_out = model(static_x)
        """,
        use_instead="""
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    model(static_x)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_out = model(static_x)
        """,
    )
)
declare(
    Rule(
        code="GL109",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 3 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="unjoined-stream-in-capture",
        summary=(
            "Inside a capture, `with torch.cuda.stream(s):` where `s` did not first wait on the "
            "capturing stream, or is not joined back (`current_stream().wait_stream(s)` or an "
            "event) before the capture ends."
        ),
        why=(
            "A side stream joins the capture only by waiting on the capturing stream; without "
            "that its work is not in the graph (or the capture fails). A side stream not joined "
            "back leaves the capture unjoined (cudaErrorStreamCaptureUnjoined) or the graph "
            "unordered."
        ),
        example="""
            with torch.cuda.graph(g):
                with torch.cuda.stream(side):
                    b = proj(x)
                out = a + b
        """,
        use_instead="""
            with torch.cuda.graph(g):
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    b = proj(x)
                torch.cuda.current_stream().wait_stream(side)
                out = a + b
        """,
    )
)
declare(
    Rule(
        code="GL110",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 3 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="unregistered-generator-in-capture",
        summary=(
            "A user `torch.Generator(device='cuda')` passed as `generator=` in a capture, with no "
            "`graph.register_generator_state(gen)` for it."
        ),
        why=(
            "The graph captures the generator's seed and offset as they were at capture. Unless "
            "the generator is registered with the graph, every replay draws the same random "
            "numbers."
        ),
        example="""
            gen = torch.Generator(device="cuda")
            with torch.cuda.graph(g):
                mask = torch.rand(x.shape, device="cuda", generator=gen) > p
        """,
        use_instead="""
            gen = torch.Generator(device="cuda")
            g.register_generator_state(gen)
            with torch.cuda.graph(g):
                mask = torch.rand(x.shape, device="cuda", generator=gen) > p
        """,
    )
)
declare(
    Rule(
        code="GL111",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 5 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="host-indexing-in-capture",
        summary=(
            "Indexing or slicing a CUDA tensor with a Python list, a CPU tensor, or slice bounds "
            "that are tensors (`x[[0, 2]]`, `x[idx_cpu]`, `x[:n_gpu]`) in capture."
        ),
        why=(
            "A list or CPU index is copied to the device on every use (captured once, frozen); "
            "a tensor used as a slice bound is read on the host (a sync), and the slice length "
            "seen at capture is frozen."
        ),
        example="""
            with torch.cuda.graph(g):
                head = x[[0, 2, 4]]
                prefix = x[: lengths.max()]
        """,
        use_instead="""
            index = torch.tensor([0, 2, 4], device="cuda")  # built once, before capture
            with torch.cuda.graph(g):
                head = x.index_select(0, index)
                prefix = x[:max_len]  # a Python int fixed for this graph
        """,
    )
)
declare(
    Rule(
        code="GL112",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 4 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="pinned-allocation-in-capture",
        summary=(
            "`pin_memory()` and pinned host allocations (`torch.empty(..., pin_memory=True)` and "
            "other factories with `pin_memory=True`) in capture."
        ),
        why=(
            "Allocating page-locked host memory synchronises the device (cudaHostAlloc), which "
            "is illegal during stream capture."
        ),
        example="""
            with torch.cuda.graph(g):
                host_buf = torch.empty(n, pin_memory=True)
        """,
        use_instead="""
            host_buf = torch.empty(n, pin_memory=True)  # allocated once, before capture
            with torch.cuda.graph(g):
                out = model(static_x)
        """,
    )
)
declare(
    Rule(
        code="GL113",
        default_set_note=(
            "it reported nothing on the real-code corpus (benchmarks/corpus, 10,640 files of nine frameworks), so there is no false alarm to weigh; what it reports is pinned by 3 positive fixture cases and their negatives (the nearest legal look-alikes), and its recall on real code by the corpus's injected hazards (benchmarks/corpus/injections.toml)."
        ),
        name="hooks-on-graphed-callable",
        summary=(
            "`register_forward_hook`, `register_forward_pre_hook`, `register_full_backward_hook` "
            "(and their variants) on a module that is passed to `make_graphed_callables`, "
            "before or after."
        ),
        why=(
            "Hooks are Python: they run once while the graph is captured and never on replay, "
            "so whatever they compute or record is silently stale. make_graphed_callables "
            "requires modules without hooks."
        ),
        example="""
            layer.register_forward_hook(record_activation)
            graphed = torch.cuda.make_graphed_callables(layer, (x,))
        """,
        use_instead="""
            graphed = torch.cuda.make_graphed_callables(layer, (x,))
            out = graphed(x)
            record_activation(layer, (x,), out)  # outside the graph, explicitly
        """,
    )
)

# What a hazard does in each kind of capture, appended to the candidate's message.
CONSEQUENCES = {
    "GL101": {
        GRAPH: "a host sync during stream capture fails the capture (cudaErrorStreamCaptureUnsupported)",
        COMPILE: "under torch.compile's CUDA graphs this forces a graph break, and the code runs without a graph",
    },
    "GL102": {
        GRAPH: "deciding the branch needs a host sync, and the branch taken at capture is frozen into the graph",
        COMPILE: "torch.compile breaks the graph on data-dependent control flow (cudagraphs skipped for this part)",
    },
    "GL103": {
        GRAPH: "the output size needs a host sync, and the size seen at capture is frozen into the graph",
        COMPILE: "a data-dependent output shape makes torch.compile break the graph or skip cudagraphs",
    },
    "GL104": {
        GRAPH: "the host value is copied once at capture and every replay reuses it",
        COMPILE: "under torch.compile the host data is baked in as a constant or cudagraphs are skipped (CPU input)",
    },
    "GL105": {
        GRAPH: "host code runs once at capture; every replay reuses the value it produced then",
        COMPILE: "torch.compile traces host state once and guards on it, recompiling or freezing the value",
    },
    "GL106": {
        GRAPH: "it reads or updates host-side state on every step, which a graph cannot replay",
        COMPILE: "it syncs with the host, so torch.compile breaks the graph and skips cudagraphs",
    },
    "GL107": {
        GRAPH: "the graph reads casts that autocast's cache owns and frees when the context exits",
        COMPILE: "cudagraph replays read casts that autocast's cache owns and frees when the context exits",
    },
    "GL109": {
        GRAPH: "the side stream's work is left out of the graph or the capture fails as unjoined",
        COMPILE: "the side stream's work is not ordered with the captured graph",
    },
    "GL110": {
        GRAPH: "every replay reuses the generator state of the capture and draws the same numbers",
        COMPILE: "every cudagraph replay reuses the generator state it was recorded with",
    },
    "GL111": {
        GRAPH: "the index is copied or read on the host once at capture and frozen",
        COMPILE: "the host index forces a sync or graph break under torch.compile",
    },
    "GL112": {
        GRAPH: "pinned allocation synchronises the device, which is illegal during capture",
        COMPILE: "pinned allocation synchronises the device and breaks the cudagraph",
    },
}

_SYNC_METHODS = frozenset({"item", "tolist", "numpy"})
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
_STREAMISH = frozenset({T.STREAM, T.EVENT})
_NOT_A_TENSOR = frozenset(
    {T.PY, T.STREAM, T.EVENT, T.GRAPH, T.GENERATOR, T.OPTIMIZER, T.SCALER, T.MODULE, T.GRAPHED, T.INSTANCE, T.FUNCTION}
)
_HOOK_METHODS = frozenset(
    {
        "register_forward_hook",
        "register_forward_pre_hook",
        "register_full_backward_hook",
        "register_full_backward_pre_hook",
        "register_backward_hook",
    }
)
_DYNAMIC_SHAPE_FUNCTIONS = frozenset(
    {"torch.nonzero", "torch.unique", "torch.unique_consecutive", "torch.masked_select", "torch.argwhere"}
)
_DYNAMIC_SHAPE_METHODS = frozenset({"nonzero", "unique", "unique_consecutive", "masked_select", "argwhere"})
_PINNED_FACTORIES_KW = "pin_memory"
_HOST_STATE_MODULES = ("time.", "random.", "numpy.random.", "datetime.datetime.now", "datetime.datetime.utcnow")
_LEGACY_CUDA_CONSTRUCTORS = frozenset(
    f"torch.cuda.{name}Tensor"
    for name in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Byte", "Bool")
)


def _maybe_tensor(ty: T.Ty | None) -> bool:
    """Could this receiver be a tensor? Unknown receivers count; known non-tensors do not."""
    return ty is None or ty.kind not in _NOT_A_TENSOR


def _arg_is_tensor(w: FunctionWalker, node: ast.expr) -> bool:
    ty = w.ty(node)
    return ty is not None and ty.tensorish


def check_call(w: FunctionWalker, call: ast.Call, name: str | None) -> None:
    """Run the GL1xx call detectors on one call; ``name`` is its canonical dotted name."""
    func = call.func
    method = func.attr if isinstance(func, ast.Attribute) else None
    receiver_ty = w.ty(func.value) if isinstance(func, ast.Attribute) else None
    receiver = source_text(func.value) if isinstance(func, ast.Attribute) else ""

    # GL101: host syncs.
    if name is None and method in _SYNC_METHODS and _maybe_tensor(receiver_ty):
        w.hazard("GL101", call, f"`{receiver}.{method}()` copies a tensor to the host")
    elif name is None and method == "cpu" and _maybe_tensor(receiver_ty) and not call.args:
        w.hazard("GL101", call, f"`{receiver}.cpu()` copies a tensor to the host")
    elif name is None and method == "to" and _maybe_tensor(receiver_ty) and T.call_targets_host(call):
        w.hazard("GL101", call, f"`{receiver}.to('cpu')` copies a tensor to the host")
    elif name in ("torch.cuda.synchronize", "torch.cuda.current_stream.synchronize"):
        w.hazard("GL101", call, "`torch.cuda.synchronize()` waits for the device")
    elif name is None and method == "synchronize" and (receiver_ty is None or receiver_ty.kind in _STREAMISH):
        w.hazard("GL101", call, f"`{receiver}.synchronize()` waits for the device")
    elif name is None and method == "query" and receiver_ty is not None and receiver_ty.kind in _STREAMISH:
        w.hazard("GL101", call, f"`{receiver}.query()` polls the device from the host")
    elif name in ("float", "int", "bool", "complex") and len(call.args) == 1 and _arg_is_tensor(w, call.args[0]):
        w.hazard("GL101", call, f"`{name}()` of a tensor reads it on the host")
    elif name in ("torch.equal", "torch.allclose", "torch.is_nonzero"):
        w.hazard("GL101", call, f"`{name}` returns a Python bool: it reads the tensors on the host")
    elif name in ("print", "str", "repr", "format") and any(
        _arg_is_tensor(w, a) for a in call.args if not isinstance(a, ast.JoinedStr)
    ):
        w.hazard("GL101", call, f"`{name}()` of a tensor formats it on the host")
    elif _is_logging_call(w, call, name, method) and any(
        _arg_is_tensor(w, a) for a in call.args if not isinstance(a, ast.JoinedStr)
    ):
        w.hazard("GL101", call, "logging a tensor formats it on the host")

    # GL103: data-dependent output sizes.
    if name in _DYNAMIC_SHAPE_FUNCTIONS or (
        name is None and method in _DYNAMIC_SHAPE_METHODS and _maybe_tensor(receiver_ty)
    ):
        shown = name or f"{receiver}.{method}"
        w.hazard("GL103", call, f"`{shown}()` has a data-dependent output size")
    elif name == "torch.where" and len(call.args) == 1 and not call.keywords:
        w.hazard("GL103", call, "one-argument `torch.where(cond)` is `nonzero`: a data-dependent output size")
    elif (name == "torch.repeat_interleave" or (name is None and method == "repeat_interleave")) and (
        T.keyword(call, "output_size") is None and _repeats_are_tensor(w, call, name is not None)
    ):
        w.hazard(
            "GL103", call, "`repeat_interleave` with tensor repeats and no `output_size` has a data-dependent size"
        )

    # GL104: host data copied onto the device.
    if T.is_host_factory(name) and name != "torch.from_numpy" and T.keyword(call, "device") is not None:
        if not T.device_is_host(T.keyword(call, "device")):
            w.hazard("GL104", call, f"`{name}(...)` copies host data onto the GPU")
    elif name in _LEGACY_CUDA_CONSTRUCTORS and call.args:
        w.hazard("GL104", call, f"`{name}(...)` copies host data onto the GPU")
    elif name is None and method in ("cuda", "to") and receiver_ty is not None and receiver_ty.kind == T.HOST:
        if method == "cuda" or T.call_targets_device(call):
            w.hazard("GL104", call, f"`.{method}()` copies host data onto the GPU")

    # GL105: host state.
    if name and name.startswith(_HOST_STATE_MODULES):
        w.hazard("GL105", call, f"`{name}()` is evaluated once, at capture")

    # GL106: optimizer steps that keep host state.
    if name is None and method == "step" and receiver_ty is not None:
        if receiver_ty.kind == T.OPTIMIZER and not receiver_ty.capturable:
            w.hazard(
                "GL106",
                call,
                f"`{receiver}.step()` on an optimizer built without `capturable=True`",
                fix=w.capturable_fix(receiver_ty),
            )
        elif receiver_ty.kind == T.SCALER:
            w.hazard("GL106", call, f"`{receiver}.step()` of a GradScaler checks for infs on the host")
    elif name is None and method == "update" and receiver_ty is not None and receiver_ty.kind == T.SCALER:
        w.hazard("GL106", call, f"`{receiver}.update()` of a GradScaler reads the found-inf flag on the host")
    elif name == "torch.nn.utils.clip_grad_norm_" and T.is_true(T.keyword(call, "error_if_nonfinite")):
        w.hazard("GL106", call, "`clip_grad_norm_(..., error_if_nonfinite=True)` checks the norm on the host")

    # GL110: a CUDA generator that the graph does not know about.
    generator = T.keyword(call, "generator")
    if generator is not None:
        gen_ty = w.ty(generator)
        if gen_ty is not None and gen_ty.kind == T.GENERATOR and not w.generator_registered(generator):
            w.hazard(
                "GL110",
                generator,
                f"generator `{source_text(generator)}` is used without `register_generator_state`",
            )

    # GL112: pinned host allocations.
    if name is None and method == "pin_memory":
        w.hazard("GL112", call, "`.pin_memory()` allocates page-locked host memory")
    elif T.is_true(T.keyword(call, _PINNED_FACTORIES_KW)):
        w.hazard("GL112", call, f"`{name or method}(..., pin_memory=True)` allocates page-locked host memory")

    # GL113: hooks on modules that are (or will be) graphed.
    if method in _HOOK_METHODS and w.is_graphed_module(func.value):
        w.hazard(
            "GL113",
            call,
            f"`{receiver}` is passed to make_graphed_callables: its {method.replace('register_', '')} "
            "runs once at capture and never on replay",
            always=True,
        )


def _is_logging_call(w: FunctionWalker, call: ast.Call, name: str | None, method: str | None) -> bool:
    if name and name.startswith("logging."):
        return True
    if method in _LOG_METHODS and isinstance(call.func, ast.Attribute):
        receiver = source_text(call.func.value).lower()
        return "log" in receiver
    return False


def _repeats_are_tensor(w: FunctionWalker, call: ast.Call, function_form: bool) -> bool:
    repeats = T.keyword(call, "repeats")
    if repeats is None:
        if function_form:
            if len(call.args) == 1:
                return True  # torch.repeat_interleave(counts): the counts decide the size
            repeats = call.args[1] if len(call.args) > 1 else None
        else:
            repeats = call.args[0] if call.args else None
    return repeats is not None and _arg_is_tensor(w, repeats)


def check_test(w: FunctionWalker, test: ast.expr, what: str) -> None:
    """GL102: a tensor-valued test of ``if``/``while``/``assert``/conditional expressions."""
    ty = w.ty(test)
    if ty is not None and ty.tensorish:
        w.hazard("GL102", test, f"`{what}` on a tensor-valued condition `{_short(test)}`")


def check_subscript(w: FunctionWalker, node: ast.Subscript) -> None:
    """GL103 boolean masks and GL111 host indices."""
    if not isinstance(node.ctx, ast.Load):
        return
    receiver_ty = w.ty(node.value)
    if not _maybe_tensor(receiver_ty):
        return
    index = node.slice
    index_ty = w.ty(index)
    if index_ty is not None and index_ty.kind == T.MASK:
        w.hazard("GL103", node, f"boolean-mask indexing `{_short(node)}` has a data-dependent output size")
        return
    if isinstance(index, ast.List) or (
        isinstance(index, ast.Tuple) and any(isinstance(e, ast.List) for e in index.elts)
    ):
        w.hazard("GL111", node, f"`{_short(node)}` indexes with a Python list")
    elif index_ty is not None and index_ty.kind == T.HOST and receiver_ty is not None and receiver_ty.kind != T.HOST:
        w.hazard("GL111", node, f"`{_short(node)}` indexes a device tensor with a CPU tensor")
    else:
        slices = index.elts if isinstance(index, ast.Tuple) else [index]
        for part in slices:
            if isinstance(part, ast.Slice):
                for bound in (part.lower, part.upper, part.step):
                    if bound is not None and _arg_is_tensor(w, bound):
                        w.hazard("GL111", node, f"slice bound `{_short(bound)}` is a tensor read on the host")
                        return


def check_fstring(w: FunctionWalker, node: ast.JoinedStr) -> None:
    for value in node.values:
        if isinstance(value, ast.FormattedValue) and _arg_is_tensor(w, value.value):
            w.hazard("GL101", node, f"formatting tensor `{_short(value.value)}` in an f-string reads it on the host")
            return


def check_augassign(w: FunctionWalker, node: ast.AugAssign) -> None:
    """GL105: ``self.step += 1`` and global counters update host state once, at capture."""
    target = node.target
    if isinstance(target, ast.Subscript):
        target = target.value
    ty = w.ty(target)
    if ty is not None and ty.tensorish:
        return
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        w.hazard("GL105", node, f"`{source_text(node.target)} {_op(node)}= ...` updates Python state")
    elif isinstance(target, ast.Name) and w.is_global_name(target.id):
        w.hazard("GL105", node, f"`{target.id} {_op(node)}= ...` updates a global Python counter")


def check_self_update(w: FunctionWalker, node: ast.Assign) -> None:
    """GL105: `self.steps = self.steps + 1`, the spelled-out form of an augmented update."""
    if len(node.targets) != 1 or not isinstance(node.value, ast.BinOp):
        return
    target = node.targets[0]
    if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
        return
    text = source_text(target)
    if not any(isinstance(n, ast.Attribute) and source_text(n) == text for n in ast.walk(node.value)):
        return
    if any(ty is not None and ty.tensorish for ty in (w.ty(target), w.ty(node.value))):
        return  # a tensor counter updated on the device: replayed every time
    w.hazard("GL105", node, f"`{text} = {text} ...` updates Python state")


def check_stream_context(w: FunctionWalker, node: ast.With | ast.AsyncWith, stream: ast.expr) -> None:
    """GL109: a side stream inside a capture must fork from and join back to the capture."""
    text = source_text(stream)
    if isinstance(stream, ast.Call):
        return  # with torch.cuda.stream(torch.cuda.current_stream()) and similar: no fork
    forked = w.ordering_before(node.lineno, text)
    joined = w.joined_after(node.end_lineno or node.lineno, text)
    if forked and joined:
        return
    missing = []
    if not forked:
        missing.append(f"`{text}` does not wait on the capturing stream first")
    if not joined:
        missing.append(f"`{text}` is not joined back (`torch.cuda.current_stream().wait_stream({text})`)")
    w.hazard("GL109", node.items[0].context_expr, "side stream in capture: " + " and ".join(missing))


def _short(node: ast.AST, limit: int = 40) -> str:
    text = source_text(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _op(node: ast.AugAssign) -> str:
    return {
        ast.Add: "+",
        ast.Sub: "-",
        ast.Mult: "*",
        ast.Div: "/",
        ast.FloorDiv: "//",
        ast.Mod: "%",
        ast.Pow: "**",
        ast.BitOr: "|",
        ast.BitAnd: "&",
        ast.BitXor: "^",
        ast.LShift: "<<",
        ast.RShift: ">>",
        ast.MatMult: "@",
    }.get(type(node.op), "?")
