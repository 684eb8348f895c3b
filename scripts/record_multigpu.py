"""Two-rank NCCL programs captured in CUDA graphs: snapshots, sanitizer and launcher (issue 20).

Run it under torchrun, one process per GPU, with the multicast/NVLS paths off in *every*
process (the script also forces them at the very top, before torch is imported):

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        timeout 235 python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        scripts/record_multigpu.py OUTDIR

Programs (callables over CUDA tensors, each a collective between compute):

- ``allreduce``: ``y = x * 2; all_reduce(y); return y + 1`` (the collective works on an
  intermediate: nothing pinned, the compute kernels re-pointed around it);
- ``allgather``: ``all_gather_into_tensor(g, x); return g, g * 2 + b`` (the collective reads
  input 0 and writes output 0: both pinned, GL507; input 1 and output 1 re-pointed);
- ``ddp_step``: a Linear forward and backward (``autograd.grad``, no ``.grad`` state), the
  gradients flattened into one bucket, averaged with all_reduce and returned with the loss;
- ``tp_pair``: a column-parallel Linear, GELU, a row-parallel Linear, all_reduce of the
  partial sums, then the bias (Megatron's order);
- ``race_allreduce`` (sanitizer only): a side stream writes the buffer the all_reduce reads
  before the streams are joined, a seeded GL504 next to a collective.

For each program and rank: three captures recorded exactly as `scripts/record_snapshots.py`
does (`capture_set` + `capture_attributed` + `analyze_pair`), written as
``multigpu/<program>-rank<r>.json`` (the format of ``fixtures/snapshots/*.json``; each
capture's provenance adds rank, world size, NCCL version and the environment); a scan of
the NCCL kernel nodes' argument bytes for the addresses of the user buffers; then
`sanitize_callable` (findings per rank) and `ParameterizedLauncher` on three fresh inputs
compared with eager on both ranks (fp32 ``allclose``, rtol 1e-5 and atol 1e-6; whether the
results are also bit-identical is reported beside it). Every program is wrapped in try/except; the process
group is always destroyed.

OUTDIR receives five files, each rewritten or appended after every program so that a run
cut short still leaves what it did: ``multigpu.txt`` (rank 0's summary of both ranks, at the
end), ``results-rank0.json`` and ``results-rank1.json`` (what the ``cuda`` tests assert on),
``snapshots-rank0.tar`` and ``snapshots-rank1.tar`` (``multigpu/<program>-rank<r>.json``;
unpack them into the fixtures with ``tar -C fixtures/snapshots -xf OUTDIR/snapshots-rank0.tar``
and the same for rank 1).
"""

from __future__ import annotations

import os

# Before torch (and NCCL, NVSHMEM) is imported: no NVLink multicast anywhere.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(MULTICAST_OFF)

import contextlib  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tarfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402

from graphlint.launcher.launcher import ParameterizedLauncher, _is_view  # noqa: E402
from graphlint.runtime_sanitizer import driver  # noqa: E402
from graphlint.runtime_sanitizer.analysis import two_capture as analysis  # noqa: E402
from graphlint.runtime_sanitizer.analysis.report import analyze_pair  # noqa: E402
from graphlint.runtime_sanitizer.analysis.snapshot import save_captures  # noqa: E402
from graphlint.runtime_sanitizer.api import sanitize_callable  # noqa: E402
from graphlint.runtime_sanitizer.capture.two_captures import (  # noqa: E402
    capture_attributed,
    capture_set,
    module_tensors,
    tensors_in,
)

TIMEOUT_S = 60  # a rank stuck in a collective is aborted by the NCCL watchdog after this
LAUNCHER_CALLS = 3
RTOL, ATOL = 1e-5, 1e-6  # fp32; `bitwise` is reported separately
SNAPSHOT_DIR = "multigpu"


# -- programs ----------------------------------------------------------------------------------


def allreduce(x):
    y = x * 2
    dist.all_reduce(y)
    return y + 1


def allgather(x, b):
    world = dist.get_world_size()
    g = torch.empty(world * x.numel(), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(g, x)
    return g, g * 2 + b


class DDPStep:
    """One data-parallel step without the DDP wrapper: forward, backward, one bucket averaged."""

    def __init__(self, dim: int = 64, out: int = 32):
        self.linear = nn.Linear(dim, out).cuda()

    def __call__(self, x, target):
        loss = torch.nn.functional.mse_loss(self.linear(x), target)
        grads = torch.autograd.grad(loss, list(self.linear.parameters()))
        bucket = torch.cat([g.reshape(-1) for g in grads]) / dist.get_world_size()
        dist.all_reduce(bucket)
        return loss.detach(), bucket


class TPPair(nn.Module):
    """Column-parallel Linear (this rank's rows of W1), GELU, row-parallel Linear (this rank's
    columns of W2), all_reduce of the partial sums, then the bias."""

    def __init__(self, dim: int = 64, hidden: int = 256, world: int = 2):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden // world)
        self.w2 = nn.Linear(hidden // world, dim, bias=False)
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        z = self.w2(torch.nn.functional.gelu(self.w1(x)))
        dist.all_reduce(z)
        return z + self.bias


def race_allreduce(x):
    side = race_allreduce.side
    buf = torch.empty_like(x)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.mul(x, 3.0, out=buf)
    dist.all_reduce(buf)  # not ordered after the side stream's write: a race on every replay
    torch.cuda.current_stream().wait_stream(side)
    return buf + 1


def _randn(shape, seed: int) -> Any:
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, generator=generator, device="cuda")


def programs(rank: int, world: int) -> dict[str, dict[str, Any]]:
    """name -> fn, module (fixed parameters), inputs(seed), launcher (run it or not), expected findings.
    Inputs differ between ranks except for the tensor-parallel pair (its input is replicated)."""
    torch.manual_seed(1000 + rank)  # parameters: each rank its own shard or replica
    step = DDPStep()
    with torch.no_grad():  # data-parallel replicas start equal
        for p in step.linear.parameters():
            p.copy_(_randn(p.shape, 7))
    tp = TPPair(world=world).cuda()
    with torch.no_grad():  # the bias after the all_reduce is replicated
        tp.bias.copy_(_randn(tp.bias.shape, 11))
    race_allreduce.side = torch.cuda.Stream()
    n = 1 << 14
    return {
        "allreduce": {"fn": allreduce, "inputs": lambda s: [_randn(n, 10 * s + rank)], "launcher": True},
        "allgather": {
            "fn": allgather,
            "inputs": lambda s: [_randn(n, 10 * s + rank), _randn(world * n, 10 * s + 5 + rank)],
            "launcher": True,
            "pinned_gl507": ["input 0", "output 0"],
        },
        "ddp_step": {
            "fn": step,
            "module": step.linear,
            "inputs": lambda s: [_randn((16, 64), 10 * s + rank), _randn((16, 32), 10 * s + 3 + rank)],
            "launcher": True,
            "pinned_gl507": ["output 1"],
        },
        "tp_pair": {"fn": tp, "module": tp, "inputs": lambda s: [_randn((8, 64), 10 * s)], "launcher": True},
        "race_allreduce": {
            "fn": race_allreduce,
            "inputs": lambda s: [_randn(n, 10 * s + rank)],
            "launcher": False,
            "expected_findings": ["GL504"],
        },
    }


# -- recording and analysis -------------------------------------------------------------------


def extra_provenance(rank: int, world: int) -> dict[str, Any]:
    try:
        nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception as error:  # pragma: no cover - informational
        nccl = f"unknown ({error})"
    return {
        "rank": rank,
        "world_size": world,
        "local_device": torch.cuda.current_device(),
        "device_name": torch.cuda.get_device_name(torch.cuda.current_device()),
        "device_count": torch.cuda.device_count(),
        "backend": "nccl",
        "nccl": nccl,
        "env": {key: os.environ.get(key, "") for key in MULTICAST_OFF},
        "script": "scripts/record_multigpu.py",
    }


def scan_addresses(data: bytes, ranges: list[tuple[str, int, int]]) -> list[dict[str, Any]]:
    """Every byte offset of ``data`` whose 8 bytes (little-endian) point into one of ``ranges``
    (name, start, bytes): does a kernel's argument carry that buffer's address at all?"""
    hits = []
    for offset in range(len(data) - 7):
        value = int.from_bytes(data[offset : offset + 8], "little")
        for name, start, size in ranges:
            if start <= value < start + max(size, 1):
                hits.append({"offset": offset, "buffer": name, "delta": value - start})
    return hits


def buffer_scan(first, ordering) -> list[dict[str, Any]]:
    """For each communication kernel node: which input/output addresses its argument bytes hold
    (first capture), and which of its own operator's buffers (the attributed capture records
    the c10d operator's tensors) appear in its arguments there."""
    found = []
    regions = [(r.name, r.start, r.nbytes) for r in first.regions if r.role in ("input", "output")]
    for index, name in analysis.fixed_address_nodes(first).items():
        node = first.nodes[index]
        entry: dict[str, Any] = {
            "node": index,
            "kernel": name,
            "argument_bytes": [p.size for p in node.params],
            "io_hits": [hit for p in node.params for hit in scan_addresses(p.data, regions)],
        }
        if ordering is not None and index < len(ordering.nodes):
            attributed = ordering.nodes[index]
            own = [
                (f"{kind}{i}", start, size)
                for kind, accesses in (("read", attributed.reads), ("write", attributed.writes))
                for i, (start, size) in enumerate(accesses)
            ]
            entry["op"] = attributed.op
            entry["op_buffers"] = [[n, hex(s), size] for n, s, size in own]
            entry["op_buffer_hits"] = [hit for p in attributed.params for hit in scan_addresses(p.data, own)]
        entry["user_buffers_in_arguments"] = bool(entry["io_hits"] or entry.get("op_buffer_hits"))
        found.append(entry)
    return found


def record(name: str, spec: dict[str, Any], out_dir: Path, rank: int, world: int) -> dict[str, Any]:
    """Three captures exactly as `scripts/record_snapshots.py` takes them, saved per rank."""
    fn, inputs = spec["fn"], spec["inputs"](0)
    fixed = module_tensors(spec.get("module"))
    first, second, repeat, moved_repeat = capture_set(fn, inputs, fixed)
    ordering = capture_attributed(fn, inputs, first.snapshot, fixed)
    report = analyze_pair(
        first.snapshot, second.snapshot, (name, 1), name, repeat.snapshot, ordering, moved_repeat.snapshot
    )
    extra = extra_provenance(rank, world)
    captures = {
        "first": first.snapshot,
        "second": second.snapshot,
        "repeat": repeat.snapshot,
        "moved_repeat": moved_repeat.snapshot,
    }
    if ordering is not None:
        captures["ordering"] = ordering
    for snapshot in captures.values():
        snapshot.provenance.update(extra)
    views = [i for i, t in enumerate(first.outputs) if _is_view(t)]
    pins = analysis.pins(report.words, first.snapshot, len(first.outputs), views, ordering=ordering)
    communication = analysis.fixed_address_nodes(first.snapshot)
    comm_roles: dict[str, int] = {}
    for word in report.words:
        if word.node in communication:
            comm_roles[word.role] = comm_roles.get(word.role, 0) + 1
    slots = report.input_slots
    meta = {
        "program": name,
        "rank": rank,
        "world_size": world,
        "inputs": [
            {"shape": list(t.shape), "dtype": str(t.dtype), "nbytes": t.untyped_storage().nbytes()} for t in inputs
        ],
        "outputs": len(first.outputs),
        "input_slots": [[w.node, w.param, w.offset, w.region, w.delta, w.width] for w in slots],
        "compute_input_slots": [[w.node, w.param, w.offset, w.region] for w in slots if w.node not in communication],
        "communication_nodes": {str(k): v for k, v in communication.items()},
        "communication_word_roles": comm_roles,
        "pins": {
            f"{role} {index}": {"reason": p.reason, "fixed_address": p.fixed_address}
            for (role, index), p in pins.items()
        },
        "findings": [[f.code, f.message] for f in report.findings],
        "expected_findings": spec.get("expected_findings", []),
        "ordering_checked": ordering is not None,
        "buffer_scan": buffer_scan(first.snapshot, ordering),
    }
    path = out_dir / SNAPSHOT_DIR / f"{name}-rank{rank}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    save_captures(path, captures, meta)
    with tarfile.open(out_dir / f"snapshots-rank{rank}.tar", "a") as archive:  # one file per rank comes back
        archive.add(path, arcname=f"{SNAPSHOT_DIR}/{path.name}")
    path.unlink()
    kinds = [n.type if n.type != "kernel" else n.name[:60] for n in first.snapshot.nodes]
    return {
        "snapshot": str(path.relative_to(out_dir)),
        "nodes": kinds,
        "input_slots": meta["input_slots"],
        "compute_input_slots": len(meta["compute_input_slots"]),
        "communication_nodes": meta["communication_nodes"],
        "communication_word_roles": comm_roles,
        "pins": meta["pins"],
        "findings": meta["findings"],
        "ordering_checked": meta["ordering_checked"],
        "buffer_scan": meta["buffer_scan"],
    }


def sanitize(spec: dict[str, Any]) -> dict[str, Any]:
    report = sanitize_callable(spec["fn"], *spec["inputs"](0), module=spec.get("module"))
    graph = report.graph
    communication = analysis.fixed_address_nodes(graph) if graph is not None else {}
    return {
        "findings": [[f.code, f.message] for f in report.findings],
        "codes": sorted({f.code for f in report.findings}),
        # GL504 is judged when the graph drawn is the attributed capture (each node's op known)
        "gl504_judged": graph is not None and any(node.op for node in graph.nodes),
        "communication_ops": {str(i): graph.nodes[i].op for i in communication} if graph is not None else {},
        "unattributed_nodes": [n.index for n in analysis.unattributed_nodes(graph)] if graph is not None else [],
        "input_slots": len(report.input_slots),
    }


def _patched_nodes(launcher: ParameterizedLauncher) -> list[int]:
    drv = driver.bindings()
    graph = launcher._capture.graph
    count = len(launcher._capture.snapshot.nodes)
    handles = driver.ok(drv.cuGraphGetNodes(drv.CUgraph(graph.raw_cuda_graph()), count))[0]
    index_of = {int(h): i for i, h in enumerate(handles)}
    return sorted(index_of[node.handle_int] for node in launcher._nodes)


def launch(spec: dict[str, Any]) -> dict[str, Any]:
    """The launcher on fresh inputs, three calls, each compared with eager on the same inputs."""
    fn = spec["fn"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        launcher = ParameterizedLauncher(fn, spec["inputs"](0), module=spec.get("module"))
        calls, kept = [], []
        for call in range(1, LAUNCHER_CALLS + 1):
            fresh = spec["inputs"](call)
            got = launcher(*fresh)
            torch.cuda.synchronize()
            expected = tensors_in(fn(*fresh))
            torch.cuda.synchronize()
            kept.append((got, [t.clone() for t in got]))
            calls.append(
                {
                    "call": call,
                    "bitwise": all(torch.equal(a, b) for a, b in zip(got, expected, strict=True)),
                    "allclose": all(
                        torch.allclose(a, b, rtol=RTOL, atol=ATOL) for a, b in zip(got, expected, strict=True)
                    ),
                    "max_abs_diff": max(float((a - b).abs().max()) for a, b in zip(got, expected, strict=True)),
                }
            )
        # No output of an earlier call was overwritten by a later one.
        untouched = all(torch.equal(a, b) for got, copies in kept for a, b in zip(got, copies, strict=True))
    communication = analysis.fixed_address_nodes(launcher._capture.snapshot)
    patched = _patched_nodes(launcher)
    return {
        "calls": calls,
        "matches_eager": all(c["allclose"] for c in calls) and untouched,
        "outputs_untouched_by_later_calls": untouched,
        "fallback_reason": launcher.fallback_reason,
        "pinned": launcher.pinned,
        "gl507": [f.message for f in launcher.report.findings if f.code == "GL507"],
        "nodes": len(launcher._capture.snapshot.nodes),
        "patched_nodes": patched,
        "patched_communication_nodes": [i for i in patched if i in communication],
        "findings": sorted({f.code for f in launcher.report.findings}),
        "warnings": [str(w.message)[:300] for w in caught],
    }


def run_program(name: str, spec: dict[str, Any], out_dir: Path, rank: int, world: int) -> dict[str, Any]:
    result: dict[str, Any] = {"errors": {}}
    phases: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("record", lambda: record(name, spec, out_dir, rank, world)),
        ("sanitize", lambda: sanitize(spec)),
    ]
    if spec["launcher"]:
        phases.append(("launcher", lambda: launch(spec)))
    for phase, action in phases:
        start = time.monotonic()
        try:
            result[phase] = action()
        except Exception as error:  # report it; the other phases and programs still run
            result["errors"][phase] = f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=6)}"
            print(f"[rank {rank}] {name} {phase} FAILED: {type(error).__name__}: {error}", flush=True)
        finally:
            torch.cuda.synchronize()
        result.setdefault("seconds", {})[phase] = round(time.monotonic() - start, 2)
    result["expected_findings"] = spec.get("expected_findings", [])
    result["pinned_gl507_expected"] = spec.get("pinned_gl507", [])
    return result


def describe(rank: int, name: str, result: dict[str, Any]) -> list[str]:
    lines = [f"== {name} (rank {rank}) seconds={result.get('seconds')}"]
    for phase, error in result["errors"].items():
        lines.append(f"   {phase} FAILED: {error.splitlines()[0]}")
    rec = result.get("record")
    if rec:
        lines.append(f"   nodes: {rec['nodes']}")
        lines.append(f"   input slots: {rec['input_slots']} (compute: {rec['compute_input_slots']})")
        lines.append(
            f"   communication nodes: {rec['communication_nodes']} word roles: {rec['communication_word_roles']}"
        )
        fixed_pins = {key: pin["fixed_address"] for key, pin in rec["pins"].items()}
        lines.append(f"   pins (analysis, key: fixed address): {fixed_pins}")
        lines.append(f"   recorded-pair findings: {[f'{c} {m[:160]}' for c, m in rec['findings']]}")
        lines.append(f"   ordering checked: {rec['ordering_checked']}")
        for scan in rec["buffer_scan"]:
            lines.append(
                f"   NCCL args node {scan['node']} ({scan['kernel'][:60]}, bytes {scan['argument_bytes']}): "
                f"user buffers in arguments: {scan['user_buffers_in_arguments']}; io hits {scan['io_hits'][:6]}; "
                f"op {scan.get('op')!r} buffers {scan.get('op_buffers')} hits {scan.get('op_buffer_hits', [])[:6]}"
            )
    san = result.get("sanitize")
    if san:
        lines.append(
            f"   sanitize_callable: codes {san['codes']}, GL504 judged {san['gl504_judged']}, "
            f"comm ops {san['communication_ops']}, unattributed nodes {san['unattributed_nodes']}"
        )
        for code, message in san["findings"]:
            lines.append(f"     {code} {message[:220]}")
    lau = result.get("launcher")
    if lau:
        lines.append(
            f"   launcher: matches eager {lau['matches_eager']} (rtol {RTOL}, atol {ATOL}); calls "
            f"{[(c['call'], c['bitwise'], c['allclose'], c['max_abs_diff']) for c in lau['calls']]}; "
            f"fallback {lau['fallback_reason']!r}"
        )
        lines.append(
            f"   launcher: {len(lau['patched_nodes'])} of {lau['nodes']} nodes patched {lau['patched_nodes']} "
            f"(communication nodes patched: {lau['patched_communication_nodes']}); findings {lau['findings']}"
        )
        lines.append(f"   pinned: {lau['pinned']}")
        for message in lau["gl507"]:
            lines.append(f"     GL507 {message[:220]}")
        for message in lau["warnings"]:
            lines.append(f"     warning: {message[:220]}")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    out_dir = Path(argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    stale_files = [f"snapshots-rank{rank}.tar", f"results-rank{rank}.json"] + (["multigpu.txt"] if rank == 0 else [])
    for stale in stale_files:  # the archives are appended to
        (out_dir / stale).unlink(missing_ok=True)
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    timeout = datetime.timedelta(seconds=TIMEOUT_S)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local), timeout=timeout)
    results: dict[str, Any] = {"rank": rank, "world_size": world, "provenance": {}, "programs": {}}
    status = 0
    try:
        cpu = dist.new_group(backend="gloo", timeout=timeout)
        results["provenance"] = extra_provenance(rank, world)
        results["provenance"]["torch"] = torch.__version__
        warm = torch.ones(4, device="cuda")
        dist.all_reduce(warm)  # the communicator is up before any capture
        torch.cuda.synchronize()
        results["warm_allreduce_ok"] = bool((warm == world).all())
        for name, spec in programs(rank, world).items():
            result = run_program(name, spec, out_dir, rank, world)
            results["programs"][name] = result
            print("\n".join(f"[rank {rank}] {line}" for line in describe(rank, name, result)), flush=True)
            statuses: list[Any] = [None] * world
            dist.all_gather_object(statuses, sorted(result["errors"]), group=cpu)
            if any(s != statuses[0] for s in statuses):
                print(f"[rank {rank}] {name}: ranks failed in different phases {statuses}", flush=True)
            (out_dir / f"results-rank{rank}.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
        results["complete"] = True
        (out_dir / f"results-rank{rank}.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
        dist.barrier(group=cpu)
        if rank == 0:
            summarize(out_dir, world)
    except Exception:
        status = 1
        traceback.print_exc()
        results["fatal"] = traceback.format_exc()
        (out_dir / f"results-rank{rank}.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    finally:
        dist.destroy_process_group()
    return status


def summarize(out_dir: Path, world: int) -> None:
    """multigpu.txt from every rank's results."""
    lines = [f"graphlint multi-GPU run, {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}"]
    verdicts = []
    for rank in range(world):
        path = out_dir / f"results-rank{rank}.json"
        if not path.exists():
            lines.append(f"rank {rank}: no results file")
            verdicts.append(f"rank {rank}: MISSING")
            continue
        results = json.loads(path.read_text())
        lines.append(f"\n##### rank {rank}: {results['provenance']}")
        for name, result in results["programs"].items():
            lines.extend(describe(rank, name, result))
            verdicts.append(f"rank {rank} {name}: {verdict(result)}")
    lines[1:1] = ["", "VERDICTS", *verdicts]
    (out_dir / "multigpu.txt").write_text("\n".join(lines) + "\n")
    with contextlib.suppress(OSError):
        (out_dir / SNAPSHOT_DIR).rmdir()  # emptied as each snapshot went into its rank's archive
    print("\n".join(lines[: 2 + len(verdicts) + 1]), flush=True)


def verdict(result: dict[str, Any]) -> str:
    """ok, or what the issue asks for that this program did not show."""
    problems = [f"{phase} failed" for phase in result["errors"]]
    san = result.get("sanitize")
    if san:
        wrong = [c for c in san["codes"] if c not in ("GL508", *result["expected_findings"])]
        missing = [c for c in result["expected_findings"] if c not in san["codes"]]
        problems += [f"unexpected {c}" for c in wrong] + [f"missing {c}" for c in missing]
        if not san["gl504_judged"]:
            problems.append("GL504 not judged")
    lau = result.get("launcher")
    if lau:
        if not lau["matches_eager"]:
            problems.append("launcher differs from eager")
        if lau["fallback_reason"]:
            problems.append(f"launcher fell back ({lau['fallback_reason'][:60]})")
        gl507 = " ".join(lau["gl507"])
        for key in result["pinned_gl507_expected"]:
            if key not in lau["pinned"] or f"{key} is used by" not in gl507:
                problems.append(f"{key} not pinned with GL507")
        if lau["patched_communication_nodes"]:
            problems.append("a communication node was re-pointed")
    return "ok" if not problems else "; ".join(problems)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
