"""Two ranks, one GPU each, NCCL collectives inside captured graphs (issue 20; marker `cuda`).

Runs `scripts/record_multigpu.py` under torchrun once (two processes, NVLink multicast off in
each) and checks what each rank reported: the sanitizer gives no GL501/GL505 for the
collectives and still judges GL504 around them, and the parameterized launcher re-points the
compute kernels, keeps the collectives' buffers fixed (GL507) and equals eager on both ranks.
Skipped, saying why, without two CUDA devices. With ``GRAPHLINT_MULTIGPU_OUT=DIR`` the run
writes its files (results, per-rank snapshot archives, summary) and torchrun's output
(``torchrun.log``) into DIR instead of a temporary folder, so one run gives both the
verdict and the snapshots to commit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the multi-GPU tests need torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.device_count() < 2,
        reason="needs two CUDA devices: two NCCL ranks, one GPU each",
    ),
]

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "record_multigpu.py"
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
LAUNCHED = ("allreduce", "allgather", "ddp_step", "tp_pair")
# what a collective reads or writes directly: copied through the static buffer, never re-pointed
PINNED = {"allgather": ("input 0", "output 0"), "ddp_step": ("output 1",)}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, list[dict]]:
    pytest.importorskip("cuda.bindings", reason="cuda-bindings is not installed")
    if not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
        pytest.skip("torch was built without NCCL")
    chosen = os.environ.get("GRAPHLINT_MULTIGPU_OUT")
    out = Path(chosen) if chosen else tmp_path_factory.mktemp("multigpu")
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    try:
        result = subprocess.run(
            [*command, str(SCRIPT), str(out)],
            cwd=ROOT,
            env={**os.environ, **MULTICAST_OFF},
            capture_output=True,
            text=True,
            timeout=300,  # the script ends in under four minutes, or a collective is stuck
        )
    except subprocess.TimeoutExpired as error:
        result = subprocess.CompletedProcess(error.cmd, -9, _text(error.stdout), _text(error.stderr) + "\nTIMEOUT")
    if chosen:
        (out / "torchrun.log").write_text(
            f"$ {' '.join(command)} ... (rc {result.returncode})\n{result.stdout}\n{result.stderr}"
        )
    ranks = []
    for rank in range(2):
        path = out / f"results-rank{rank}.json"
        ranks.append(json.loads(path.read_text()) if path.exists() else {})
    return result, ranks


def _text(output: bytes | str | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def _programs(run, name: str) -> list[dict]:
    result, ranks = run
    assert all(name in results.get("programs", {}) for results in ranks), (result.stdout + result.stderr)[-3000:]
    return [results["programs"][name] for results in ranks]


def test_the_two_rank_run_succeeded(run) -> None:
    result, ranks = run
    tail = (result.stdout + result.stderr)[-4000:]
    assert result.returncode == 0, tail
    assert [r.get("rank") for r in ranks] == [0, 1], tail
    for results in ranks:
        assert "fatal" not in results and results.get("complete") and results["warm_allreduce_ok"], tail
        assert results["provenance"]["env"] == MULTICAST_OFF
        assert set(results["programs"]) == {*LAUNCHED, "race_allreduce"}
        for name, program in results["programs"].items():
            assert program["errors"] == {}, (name, program["errors"])


@pytest.mark.parametrize("name", LAUNCHED)
def test_launcher_equals_eager_on_both_ranks(run, name: str) -> None:
    for rank, program in enumerate(_programs(run, name)):
        launcher = program["launcher"]
        assert launcher["fallback_reason"] is None, (rank, launcher["fallback_reason"], launcher["warnings"])
        assert len(launcher["calls"]) == 3 and all(call["allclose"] for call in launcher["calls"]), (rank, launcher)
        assert launcher["outputs_untouched_by_later_calls"], rank
        assert launcher["matches_eager"], rank
        # compute kernels re-pointed around the collectives, the collectives themselves never
        assert launcher["patched_nodes"], (rank, "no node was re-pointed")
        assert launcher["patched_communication_nodes"] == [], rank


@pytest.mark.parametrize("name", LAUNCHED)
def test_collective_buffers_are_pinned_with_gl507(run, name: str) -> None:
    for rank, program in enumerate(_programs(run, name)):
        launcher = program["launcher"]
        fixed = sorted(key for key, reason in launcher["pinned"].items() if "registered at fixed addresses" in reason)
        assert fixed == sorted(PINNED.get(name, ())), (rank, launcher["pinned"])
        assert len(launcher["gl507"]) == len(fixed), (rank, launcher["gl507"])
        for key in fixed:
            named = [m for m in launcher["gl507"] if m.startswith(f"{key} is used by `") and "nccl" in m.lower()]
            assert named, (rank, key, launcher["gl507"])


@pytest.mark.parametrize("name", [*LAUNCHED, "race_allreduce"])
def test_no_gl501_or_gl505_from_collectives_and_gl504_still_judged(run, name: str) -> None:
    for rank, program in enumerate(_programs(run, name)):
        sanitized = program["sanitize"]
        assert not {"GL501", "GL505"} & set(sanitized["codes"]), (rank, sanitized["findings"])
        assert program["record"]["communication_nodes"], (rank, "no NCCL kernel node was recognised")
        assert sanitized["gl504_judged"], rank
        assert all(op.startswith("c10d.") for op in sanitized["communication_ops"].values()), (rank, sanitized)
        expected = ["GL504"] if name == "race_allreduce" else []
        assert [code for code in sanitized["codes"] if code not in ("GL508",)] == expected, (rank, sanitized)
        assert "GL508" in sanitized["codes"], rank  # informational: the graph's private pool
