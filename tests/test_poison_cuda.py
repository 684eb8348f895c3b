"""`graphlint sanitize --poison` on a real GPU (marker `cuda`), run as a user runs it: a padded
batch whose graph averages over the stale rows gets NaN where the plain run got plausible
numbers, and one GL511 naming the output, the stale input and the replay; its twin that reads
only the live rows gives bit-identical results and no finding. (The gpt-fast-style decode loop,
tensordict's CudaGraphModule and a graphed training loop are run under --poison by
scripts/check_real_programs.sh.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the runtime sanitizer needs torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the runtime sanitizer needs a GPU"),
]

PROGRAM = Path(__file__).with_name("poison_programs.py")
ROOT = Path(__file__).resolve().parent.parent


def _run(tmp_path: Path, program: str, poison: bool) -> tuple[object, list[dict]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out, report = tmp_path / f"{program}-{poison}.pt", tmp_path / f"{program}-{poison}.json"
    command = [sys.executable, str(PROGRAM), program, str(out)]
    if poison:
        command = [sys.executable, "-m", "graphlint", "sanitize", "--poison", "--report", str(report), "--", *command]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stderr[-2000:])
    findings = json.loads(report.read_text()) if poison else []
    return torch.load(out), findings


def test_a_loss_over_stale_padding_rows_turns_nan_and_is_gl511(tmp_path: Path) -> None:
    plain, _ = _run(tmp_path, "stale_loss", poison=False)
    poisoned, findings = _run(tmp_path, "stale_loss", poison=True)
    assert not torch.isnan(plain).any()  # without poison: plausible numbers, the bug is silent
    assert torch.isnan(poisoned[3]) and torch.equal(poisoned[:3], plain[:3])  # the short batch, and before it
    stale = [f for f in findings if f["code"] == "GL511"]
    assert len(stale) == 1, findings
    message = stale[0]["message"]
    assert "`static_loss`" in message and "`static_x`" in message and "replay 4" in message, message
    assert stale[0]["path"].endswith("poison_programs.py"), stale[0]


def test_reading_only_the_live_rows_is_bit_identical_and_no_finding(tmp_path: Path) -> None:
    plain, _ = _run(tmp_path, "live_rows", poison=False)
    poisoned, findings = _run(tmp_path, "live_rows", poison=True)
    assert torch.equal(plain, poisoned)
    assert [f for f in findings if f["severity"] != "info"] == [], findings


def _page_block(section: str) -> str:
    import re

    from graphlint.registry import all_rules

    page = all_rules()["GL511"].doc_page()
    return re.search(rf"^## {section}\n\n```python\n(.*?)\n```$", page, re.M | re.S).group(1)


@pytest.mark.parametrize("section, expected", [("Example", ["GL511"]), ("Use instead", [])])
def test_the_rule_page_example_fires_and_its_use_instead_does_not(tmp_path: Path, section: str, expected) -> None:
    batches = "batches = [torch.randn(n, 16, device='cuda') for n in (8, 8, 8, 5, 8)]\n"
    script = tmp_path / "page.py"
    script.write_text("import torch\n" + batches + _page_block(section) + "\n", encoding="utf-8")
    report = tmp_path / "findings.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "graphlint", "sanitize", "--poison", "--report", str(report), "--", "python"]
    done = subprocess.run([*command, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    codes = [f["code"] for f in json.loads(report.read_text()) if f["severity"] != "info"]
    assert codes == expected, done.stderr[-3000:]


PLUGIN_SUITE = """
import torch

BATCHES = (8, 8, 8, 5, 8)


def _padded(read_all):
    g = torch.cuda.CUDAGraph()
    static_x = torch.zeros(8, 16, device="cuda")
    with torch.cuda.graph(g):
        static_y = static_x.sum(dim=1)
    totals = []
    for n in BATCHES:
        static_x[:n].copy_(torch.randn(n, 16, device="cuda"))
        g.replay()
        totals.append((static_y if read_all else static_y[:n]).sum().item())
    return totals


def test_stale_padding_read():
    _padded(read_all=True)


def test_live_rows_only():
    _padded(read_all=False)
"""


def test_pytest_plugin_poison_fails_the_stale_test_only(pytester) -> None:
    from conftest import plugin_args

    pytester.makepyfile(test_padded=PLUGIN_SUITE)
    args = ("--graphlint-sanitize=error", "--graphlint-poison", "-p", "no:cacheprovider")
    result = pytester.runpytest_subprocess(*plugin_args(), *args)
    text = result.stdout.str()
    print(text[-4000:])
    result.assert_outcomes(passed=1, failed=1)
    assert "--graphlint-poison" in text and "test_stale_padding_read: GL511" in text
    assert "FAILED test_padded.py::test_stale_padding_read" in text
