"""Record graph snapshots on a real GPU for the CPU tests, and check the pointer analysis.

For each program: capture three times (inputs; moved inputs with other host seeds; inputs
again), write fixtures/snapshots/<program>.json with provenance, and print the analysis.
Then verify the input slots the hard way: re-point exactly those words of an instantiated
copy of the graph at a fresh input, replay, and compare with eager on that input. A missed
slot would read the old input; a wrong slot would corrupt a launch: either fails the check.

    python scripts/record_snapshots.py [OUTDIR [NAME,NAME]]   # only those programs
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from graphlint.runtime_sanitizer import driver
from graphlint.runtime_sanitizer.analysis.graph_bodies import flatten
from graphlint.runtime_sanitizer.analysis.report import analyze_pair
from graphlint.runtime_sanitizer.analysis.snapshot import save_captures
from graphlint.runtime_sanitizer.capture.introspection import kernel_params_with_arguments
from graphlint.runtime_sanitizer.capture.two_captures import (
    capture_attributed,
    capture_set,
    capture_shifted,
    module_tensors,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from conditional_programs import conditional_nodes_supported, driver_reads_bodies, gated_update  # noqa: E402

BODY_SLOTS = "n/a: read inside a conditional node's body (the launcher copies it: tests/test_conditional_cuda.py)"
UNREAD_SLOTS = "unread body: re-pointing the top-level slots alone matches eager: "


class Block(nn.Module):
    def __init__(self, dim: int = 256, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


def two_streams(x):
    side = two_streams.side
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        a = torch.relu(x) * 2
    b = torch.sigmoid(x) + 1
    torch.cuda.current_stream().wait_stream(side)
    return a + b


def copies(x):
    drv = driver.bindings()
    out = torch.empty_like(x)
    out.copy_(x)  # a device-to-device memcpy node
    scratch = torch.empty(x.numel() * 4, dtype=torch.uint8, device=x.device)
    stream = drv.CUstream(torch.cuda.current_stream().cuda_stream)
    driver.ok(drv.cuMemsetD8Async(scratch.data_ptr(), 0, scratch.numel(), stream))  # a memset node
    return out * 2 + scratch[: x.numel()].float().view_as(x)


def racy(a, b):
    side = racy.side
    x = torch.empty_like(a)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.mul(a, 3.0, out=x)
    y = x + b  # read before the join: a race on every replay
    torch.cuda.current_stream().wait_stream(side)
    return y


def gather_rows(x):
    """A gather through an index made in the capture: its kernel's by-value OffsetCalculator fills
    only the tensor's dimensions, and the rest of the struct is what the host stack held."""
    index = torch.arange(x.size(0), device=x.device).view(-1, 1).repeat(1, x.size(1))
    return torch.gather(x, 0, index)


def programs():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256)).cuda()
    block = Block().cuda()
    w = torch.randn(256, 256, device="cuda")
    gemm = lambda a: a @ w  # noqa: E731
    gemm.fixed = [w]
    compiled = torch.compile(lambda t: torch.sin(t) * 3 + t)
    two_streams.side = torch.cuda.Stream()
    racy.side = torch.cuda.Stream()
    conv = nn.Conv2d(3, 64, 7, stride=2, padding=3).cuda().to(torch.bfloat16).eval()
    linear_bf16 = nn.Sequential(nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 128)).cuda().to(torch.bfloat16)
    deep = nn.Sequential(*[layer for _ in range(4) for layer in (nn.Linear(1024, 1024), nn.GELU())]).cuda()
    return {
        "mlp": (mlp, [torch.randn(64, 256, device="cuda")], module_tensors(mlp)),
        "transformer_block": (block, [torch.randn(4, 128, 256, device="cuda")], module_tensors(block)),
        "gemm": (gemm, [torch.randn(256, 256, device="cuda")], [w]),
        "compiled": (compiled, [torch.randn(1 << 16, device="cuda")], []),
        "two_streams": (two_streams, [torch.randn(1 << 16, device="cuda")], []),
        "memcpy_memset": (copies, [torch.randn(1 << 16, device="cuda")], []),
        "elementwise": (lambda t: t * 2 + 1, [torch.randn(1 << 20, device="cuda")], []),
        # cuDNN's layout-transform kernels keep the input's low 32 bits in a 4-byte field
        "conv_bf16": (
            torch.no_grad()(conv),
            [torch.randn(8, 3, 224, 224, device="cuda", dtype=torch.bfloat16)],
            module_tensors(conv),
        ),
        "race": (racy, [torch.randn(1 << 16, device="cuda"), torch.randn(1 << 16, device="cuda")], []),
        # cuBLAS's nvjet kernels (bf16 on the H200) are launched with `extra`: one packed buffer
        "gemm_bf16": (
            torch.no_grad()(linear_bf16),
            [torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)],
            module_tensors(linear_bf16),
        ),
        # the output's block served an intermediate of the same size earlier in the capture
        "output_reuse": (torch.no_grad()(deep), [torch.randn(1, 1024, device="cuda")], module_tensors(deep)),
        "gather": (gather_rows, [torch.randn(64, 32, device="cuda")], []),
        **_conditional(),
    }


def _conditional() -> dict:
    """An if-node whose body reads the input (`torch.cond`'s and NeMo's decoders' shape)."""
    if not conditional_nodes_supported():
        print("== conditional: skipped, this driver cannot add conditional nodes")
        return {}
    step = gated_update(torch.randn(1 << 12, device="cuda"))
    # A driver without cuGraphNodeGetParams cannot hand out the body: recorded as such (GL500)
    name = "conditional" if driver_reads_bodies() else "conditional_unread"
    return {name: (step, [torch.randn(1 << 12, device="cuda")], [])}


def repoint_check(capture, slots, fn, inputs) -> bool:
    """Patch exactly the found input words at fresh inputs, replay, compare with eager."""
    drv = driver.bindings()
    fresh = [torch.randn_like(t) for t in inputs]
    graph = capture.graph
    graph.instantiate() if hasattr(graph, "instantiate") else None
    exec_ = drv.CUgraphExec(graph.raw_cuda_graph_exec())
    handles = driver.ok(drv.cuGraphGetNodes(drv.CUgraph(graph.raw_cuda_graph()), len(capture.snapshot.nodes)))[0]
    by_node: dict[int, list] = {}
    for word in slots:
        by_node.setdefault(word.node, []).append(word)
    keep = []
    for index, words in by_node.items():
        node = capture.snapshot.nodes[index]
        handle = handles[index]
        if words[0].param < 0:
            return False  # memcpy/memset re-pointing is the launcher's job (not checked here)
        buffers = [bytearray(p.data) for p in node.params]
        for word in words:
            input_index = int(word.region.replace("input", ""))
            address = fresh[input_index].data_ptr() + word.delta
            address &= (1 << (8 * word.width)) - 1  # a 4-byte field holds the low half
            buffers[word.param][word.offset : word.offset + word.width] = address.to_bytes(word.width, "little")
        new, raw, array = kernel_params_with_arguments(handle, buffers, node.extra)
        driver.ok(drv.cuGraphExecKernelNodeSetParams(exec_, handle, new))
        keep.append((raw, array))
    graph.replay()
    torch.cuda.synchronize()
    expected = fn(*fresh)
    expected = expected if isinstance(expected, torch.Tensor) else expected[0]
    tolerance = 2e-2 if expected.dtype == torch.bfloat16 else 1e-3
    return torch.allclose(capture.outputs[0], expected, rtol=tolerance, atol=tolerance)


def main() -> int:
    out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "fixtures" / "snapshots"
    out_dir.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None
    summary_path = out_dir / "SUMMARY.json"
    summary = json.loads(summary_path.read_text()) if only and summary_path.exists() else {}
    for name, (fn, inputs, fixed) in programs().items():
        if only and name not in only:
            continue
        first, second, repeat, moved_repeat = capture_set(fn, inputs, fixed)
        ordering = capture_attributed(fn, inputs, first.snapshot, fixed)
        report = analyze_pair(
            first.snapshot, second.snapshot, (name, 1), name, repeat.snapshot, ordering, moved_repeat.snapshot
        )
        slots = report.input_slots
        roles: dict[str, int] = {}
        for word in report.words:
            roles[word.role] = roles.get(word.role, 0) + 1
        meta = {
            "program": name,
            "inputs": [
                {"shape": list(t.shape), "dtype": str(t.dtype), "nbytes": t.untyped_storage().nbytes()} for t in inputs
            ],
            "input_slots": [[w.node, w.param, w.offset, w.region, w.delta, w.width] for w in slots],
        }
        kernel_slots = [w for w in slots if w.param >= 0]
        if any(w.inside >= 0 for w in slots):
            ok = BODY_SLOTS
        elif name == "conditional_unread":  # evidence: the top-level slots alone miss the body's read
            ok = f"{UNREAD_SLOTS}{repoint_check(first, slots, fn, inputs)}"
        elif slots and len(kernel_slots) == len(slots):
            ok = repoint_check(first, slots, fn, inputs)
        else:
            ok = "n/a: a memcpy/memset source (the launcher's job)" if slots else False
        meta["repoint_verified_on_gpu"] = ok
        captures = {
            "first": first.snapshot,
            "second": second.snapshot,
            "repeat": repeat.snapshot,
            "moved_repeat": moved_repeat.snapshot,
        }
        if ordering is not None:
            captures["ordering"] = ordering
        meta["ordering_checked"] = ordering is not None
        if name == "elementwise":  # input 0 one element past its alignment, for GL502
            captures["shifted"] = capture_shifted(fn, inputs, 0, fixed).snapshot
            meta["captured_alignment"] = inputs[0].data_ptr() & -inputs[0].data_ptr()
        save_captures(out_dir / f"{name}.json", captures, meta)
        kinds = [n.type if n.type != "kernel" else n.name[:50] for n in flatten(first.snapshot).nodes]
        summary[name] = {
            "nodes": len(first.snapshot.nodes),
            "node_types": sorted({n.type for n in first.snapshot.nodes}),
            "input_slots": len(slots),
            "roles": roles,
            "findings": [f"{f.code} {f.message[:120]}" for f in report.findings],
            "repoint_matches_eager": ok,
        }
        print(f"== {name}: {len(kinds)} nodes, {len(slots)} input slots, repoint matches eager: {ok}")
        print("   nodes:", kinds)
        print("   slots:", [(w.node, w.param, w.offset, w.region, w.delta, w.width) for w in slots])
        print("   roles:", roles, "findings:", summary[name]["findings"])
    summary_path.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
