"""`graphlint sanitize --compare-eager` on a real GPU (marker `cuda`), run as a user runs it: a
temperature changed after the capture, and a static input rebound instead of refilled, are each
GL512 at the line of the first operator whose output differs; a clean program with one graph per
batch size and in-place writes in its block computes bit-identical results with no finding; a
block that draws random numbers is refused (GL500) and still computes what it did."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the runtime sanitizer needs torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the runtime sanitizer needs a GPU"),
]

PROGRAM = Path(__file__).with_name("compare_eager_programs.py")
ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _run(tmp_path: Path, program: str, compare: bool) -> tuple[list, list[dict], dict]:
    out, report, summary = (tmp_path / f"{program}-{compare}.{ext}" for ext in ("pt", "json", "summary.json"))
    command = [sys.executable, str(PROGRAM), program, str(out)]
    if compare:
        sanitize = ["sanitize", "--compare-eager", "--report", str(report), "--summary-report", str(summary), "--"]
        command = [sys.executable, "-m", "graphlint", *sanitize, *command]
    done = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stderr[-2000:])
    if not compare:
        return torch.load(out), [], {}
    return torch.load(out), json.loads(report.read_text()), json.loads(summary.read_text())


def _line_of(text: str) -> int:
    return next(i for i, line in enumerate(PROGRAM.read_text().splitlines(), 1) if text in line)


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(
    "program, replay, line, operator, changed",
    [
        (
            "host_scale",
            3,
            "the captured temperature",
            "aten.div",
            "`temperature` was 1.0 at the capture and is 0.5 now",
        ),
        ("rebound_input", 2, "# first layer", "aten.addmm", "`self.static_x` is another tensor than at the capture"),
    ],
)
def test_a_seeded_bug_is_gl512_at_the_first_differing_operator(
    tmp_path, program, replay, line, operator, changed
) -> None:
    plain, _, _ = _run(tmp_path, program, compare=False)
    compared, findings, summary = _run(tmp_path, program, compare=True)
    assert _same(plain, compared)  # the comparison changes nothing the program computes
    found = [f for f in findings if f["code"] == "GL512"]
    assert len(found) == 1, findings
    message = found[0]["message"]
    assert f"replay {replay} " in message and f"`{operator}" in message, message
    assert changed in message, message  # what the program changed since the capture, by name
    assert found[0]["path"].endswith("compare_eager_programs.py") and found[0]["line"] == _line_of(line), found[0]
    assert summary["compared_replays"] >= replay, summary


def test_a_clean_program_is_bit_identical_and_has_no_finding(tmp_path: Path) -> None:
    plain, _, _ = _run(tmp_path, "clean", compare=False)
    compared, findings, summary = _run(tmp_path, "clean", compare=True)
    assert _same(plain, compared)
    assert [f for f in findings if f["severity"] != "info"] == [], findings
    assert not [f for f in findings if "--compare-eager" in f["message"]], findings  # none refused
    assert summary["compared_replays"] == 5, summary


def test_a_block_that_draws_random_numbers_is_refused_and_unchanged(tmp_path: Path) -> None:
    torch.manual_seed(0)
    plain, _, _ = _run(tmp_path, "dropout", compare=False)
    compared, findings, _ = _run(tmp_path, "dropout", compare=True)
    assert _same(plain, compared)  # the refused eager run's random draws were put back
    refused = [f for f in findings if f["code"] == "GL500"]
    assert len(refused) == 1 and "draws random numbers" in refused[0]["message"], findings
    assert not [f for f in findings if f["code"] == "GL512"]


def _page_block(section: str) -> str:
    from graphlint.registry import all_rules

    page = all_rules()["GL512"].doc_page()
    return re.search(rf"^## {section}\n\n```python\n(.*?)\n```$", page, re.M | re.S).group(1)


@pytest.mark.parametrize("section, expected", [("Example", ["GL512"]), ("Use instead", [])])
def test_the_rule_page_example_fires_and_its_use_instead_does_not(tmp_path: Path, section: str, expected) -> None:
    script = tmp_path / "page.py"
    script.write_text(_page_block(section) + "\n", encoding="utf-8")
    report = tmp_path / "findings.json"
    command = [sys.executable, "-m", "graphlint", "sanitize", "--compare-eager", "--report", str(report), "--"]
    done = subprocess.run([*command, "python", str(script)], capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    codes = [f["code"] for f in json.loads(report.read_text()) if f["severity"] != "info"]
    assert codes == expected, done.stderr[-3000:]
