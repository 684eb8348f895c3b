"""Jupyter notebooks from the command line: found in folders, their code cells analysed as one
module, each finding shown at its cell and line in every format, suppressions in cells, fixes
written back into the notebook's JSON with nothing else touched, and a file that is not a
notebook reported as GL000 instead of passing or crashing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from test_partial_runs import run_stdin

from conftest import FIXTURES, check_json, run_cli
from graphlint import cli
from graphlint.sources.notebooks import Notebook

NOTEBOOKS = FIXTURES / "notebooks"


def _copy(tmp_path: Path, *names: str) -> Path:
    for name in names:
        shutil.copy(NOTEBOOKS / name, tmp_path / name)
    return tmp_path


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_a_folder_is_searched_for_notebooks_beside_python_files(tmp_path: Path) -> None:
    _copy(tmp_path, "capture_step.ipynb")
    (tmp_path / "helpers.py").write_text("x = 1\n")
    (tmp_path / "build").mkdir()  # excluded by default, notebooks in it too
    shutil.copy(NOTEBOOKS / "capture_step.ipynb", tmp_path / "build" / "copy.ipynb")
    (tmp_path / "pyproject.toml").write_text('[tool.graphlint]\nextend-exclude = ["scratch_*.ipynb"]\n')
    shutil.copy(NOTEBOOKS / "capture_step.ipynb", tmp_path / "scratch_old.ipynb")
    shown = run_cli("check", "--show-files", ".", cwd=tmp_path)
    assert shown.stdout.split() == ["./capture_step.ipynb", "./helpers.py"]
    found = check_json(".", cwd=tmp_path)
    assert [(f["path"], f["code"]) for f in found] == [("./capture_step.ipynb", "GL101")]


def test_a_finding_is_shown_at_its_cell_and_line_in_text_json_pylint_sarif_and_github(tmp_path: Path) -> None:
    """The capture is in cell 6, the `.item()` in a function defined in cell 4: the cells connect."""
    _copy(tmp_path, "capture_step.ipynb")
    text = run_cli("check", "--no-cache", "capture_step.ipynb", cwd=tmp_path)
    assert text.returncode == 1
    assert text.stdout.startswith("capture_step.ipynb:cell 4:4:13: GL101 [host-sync-in-capture] `y.sum().item()`")
    assert "called in capture via capture_step.ipynb:cell 6:4" in text.stdout
    (finding,) = check_json("capture_step.ipynb", cwd=tmp_path)
    assert (finding["cell"], finding["line"], finding["column"], finding["end_line"]) == (4, 4, 13, 4)
    assert (finding["call_path"][0]["cell"], finding["call_path"][0]["line"]) == (6, 4)
    pylint = run_cli("check", "--no-cache", "--format", "pylint", "capture_step.ipynb", cwd=tmp_path)
    assert pylint.stdout.startswith("capture_step.ipynb:4: [GL101] cell 4: `y.sum().item()`")
    sarif = run_cli("check", "--no-cache", "--format", "sarif", "capture_step.ipynb", cwd=tmp_path)
    (result,) = json.loads(sarif.stdout)["runs"][0]["results"]
    assert result["properties"] == {"notebookCell": 4}
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 4
    assert result["message"]["text"].startswith("cell 4: ")
    github = run_cli("check", "--no-cache", "--format", "github", "capture_step.ipynb", cwd=tmp_path)
    assert github.stdout.startswith("::error file=capture_step.ipynb,line=4,col=13,")
    assert "::GL101 cell 4: `y.sum().item()`" in github.stdout


def test_plain_python_findings_carry_no_cell(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import torch\n\nwith torch.cuda.graph(g):\n    y = x.item()\n")
    (finding,) = check_json("m.py", cwd=tmp_path)
    assert "cell" not in finding and finding["line"] == 4


def test_a_suppression_in_a_cell_hides_the_finding_on_its_line(tmp_path: Path) -> None:
    _copy(tmp_path, "suppressed.ipynb")
    assert check_json("suppressed.ipynb", cwd=tmp_path) == []
    path = tmp_path / "suppressed.ipynb"
    path.write_text(path.read_text(encoding="utf-8").replace("  # noqa: GL101", ""), encoding="utf-8")
    (finding,) = check_json("suppressed.ipynb", cwd=tmp_path)
    assert (finding["code"], finding["cell"], finding["line"]) == ("GL101", 2, 3)


def test_fix_rewrites_only_the_fixed_cell_and_keeps_the_notebook_json(tmp_path: Path) -> None:
    path = _copy(tmp_path, "autocast.ipynb") / "autocast.ipynb"
    before = path.read_text(encoding="utf-8")
    fixed = run_cli("check", "--no-cache", "--fix", "autocast.ipynb", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    after = path.read_text(encoding="utf-8")
    old_line = '    "with torch.autocast(\\"cuda\\"):\\n",\n'
    new_line = '    "with torch.autocast(\\"cuda\\", cache_enabled=False):\\n",\n'
    assert after == before.replace(old_line, new_line)  # indent, key order, outputs, trailing newline kept
    old_cells, new_cells = json.loads(before)["cells"], _cells(path)
    assert [c for i, c in enumerate(new_cells) if i != 2] == [c for i, c in enumerate(old_cells) if i != 2]
    assert "%timeit g.replay()" in new_cells[3]["source"]  # a magic line comes back as written
    assert check_json("autocast.ipynb", cwd=tmp_path) == []


def test_diff_names_the_cell_and_writes_nothing(tmp_path: Path) -> None:
    path = _copy(tmp_path, "autocast.ipynb") / "autocast.ipynb"
    before = path.read_bytes()
    diff = run_cli("check", "--no-cache", "--diff", "autocast.ipynb", cwd=tmp_path)
    assert diff.returncode == 1
    assert diff.stdout.startswith("--- a/autocast.ipynb:cell 3\n+++ b/autocast.ipynb:cell 3\n")
    assert '+with torch.autocast("cuda", cache_enabled=False):' in diff.stdout
    assert path.read_bytes() == before


def test_add_noqa_writes_the_comment_into_the_cell(tmp_path: Path) -> None:
    path = _copy(tmp_path, "capture_step.ipynb") / "capture_step.ipynb"
    outputs = [cell.get("outputs") for cell in _cells(path)]
    added = run_cli("check", "--no-cache", "--add-noqa", "capture_step.ipynb", cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    cells = _cells(path)
    assert cells[3]["source"][3] == "    n = int(y.sum().item())  # noqa: GL101\n"
    assert [cell.get("outputs") for cell in cells] == outputs
    assert check_json("capture_step.ipynb", cwd=tmp_path) == []


def test_a_notebook_whose_layout_cannot_be_kept_is_not_rewritten(tmp_path: Path) -> None:
    """Rewriting it would reformat the whole file: the fix is refused and the bytes stay."""
    path = tmp_path / "wide.ipynb"
    path.write_text(json.dumps(json.loads((NOTEBOOKS / "autocast.ipynb").read_text()), indent=3), encoding="utf-8")
    before = path.read_bytes()
    fixed = run_cli("check", "--no-cache", "--fix", "wide.ipynb", cwd=tmp_path)
    assert fixed.returncode == 1
    assert "not writing wide.ipynb: its JSON layout" in fixed.stderr
    assert path.read_bytes() == before


def test_a_file_that_is_not_a_notebook_is_a_parse_error_and_the_rest_is_checked(tmp_path: Path) -> None:
    _copy(tmp_path, "not_json.ipynb", "nbformat3.ipynb", "capture_step.ipynb")
    result = run_cli("check", "--no-cache", "--format", "json", ".", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    found = {(f["path"], f["code"]): f for f in json.loads(result.stdout)}
    assert set(found) == {
        ("./capture_step.ipynb", "GL101"),
        ("./nbformat3.ipynb", "GL000"),
        ("./not_json.ipynb", "GL000"),
    }
    assert "invalid JSON" in found[("./not_json.ipynb", "GL000")]["message"]
    assert "nbformat 4" in found[("./nbformat3.ipynb", "GL000")]["message"]


def test_a_notebook_with_another_kernel_is_skipped(tmp_path: Path) -> None:
    _copy(tmp_path, "r_kernel.ipynb")
    result = run_cli("check", "--no-cache", "r_kernel.ipynb", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert "All checks passed (1 file checked)" in result.stdout


def test_the_cache_follows_a_notebooks_code(tmp_path: Path) -> None:
    path = _copy(tmp_path, "capture_step.ipynb") / "capture_step.ipynb"
    cache = ["--cache-dir", str(tmp_path / "cache"), "--format", "json"]
    first = json.loads(run_cli("check", *cache, "capture_step.ipynb", cwd=tmp_path).stdout)
    assert [f["code"] for f in first] == ["GL101"]
    document = json.loads(path.read_text(encoding="utf-8"))
    document["cells"][1]["outputs"] = []  # outputs are no code: the finding stays where it was
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    assert json.loads(run_cli("check", *cache, "capture_step.ipynb", cwd=tmp_path).stdout) == first
    document["cells"][3]["source"][3] = "    n = 0\n"  # the sync is gone from the function's cell
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    assert json.loads(run_cli("check", *cache, "capture_step.ipynb", cwd=tmp_path).stdout) == []


def _notebook(*sources: str) -> str:
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "source": source} for source in sources]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def test_only_ipython_syntax_is_masked(tmp_path: Path) -> None:
    """A `%` continuing an expression is Python, a `%%bash` cell is not: neither is a GL000."""
    text = _notebook(
        "import torch\nmsg = ('%d steps'\n       % 3)\n!ls\nfiles = !ls\ntorch.cuda.graph?",
        "%%bash\nfor i in 1 2; do echo $i; done",
        "%%time\nwith torch.cuda.graph(g):\n    y = x.item()",
    )
    (tmp_path / "magics.ipynb").write_text(text, encoding="utf-8")
    found = check_json("magics.ipynb", cwd=tmp_path)
    assert [(f["code"], f["cell"], f["line"]) for f in found] == [("GL101", 3, 3)]


def test_a_notebook_on_stdin_is_checked_and_fix_on_stdin_refuses_it(tmp_path: Path) -> None:
    source = (NOTEBOOKS / "autocast.ipynb").read_text(encoding="utf-8")
    checked = run_stdin(source, "-", "--stdin-filename", "autocast.ipynb", cwd=tmp_path)
    assert checked.stdout.startswith("autocast.ipynb:cell 3:3:6: GL107")
    fixed = run_stdin(source, "--fix", "-", "--stdin-filename", "autocast.ipynb", cwd=tmp_path)
    assert fixed.returncode == 2 and fixed.stdout == ""
    assert "not a notebook" in fixed.stderr and "Traceback" not in fixed.stderr


def test_fix_keeps_an_edit_saved_in_jupyter_during_the_run(tmp_path: Path, monkeypatch, capsys) -> None:
    """The notebook is saved again between graphlint's read and its write: the user's save wins."""
    path = _copy(tmp_path, "autocast.ipynb") / "autocast.ipynb"
    users_save = path.read_text(encoding="utf-8").replace('"execution_count": 1', '"execution_count": 7')
    real = Notebook.rewritten

    def saved_meanwhile(self: Notebook, fixed: str) -> bytes:
        path.write_text(users_save, encoding="utf-8")
        return real(self, fixed)

    monkeypatch.setattr(Notebook, "rewritten", saved_meanwhile)
    monkeypatch.chdir(tmp_path)
    cli.main(["check", "--no-cache", "--fix", "autocast.ipynb"])
    assert path.read_text(encoding="utf-8") == users_save
    assert "not writing autocast.ipynb: the file changed since it was read" in capsys.readouterr().err


def test_captures_shows_a_notebooks_capture_at_its_cell(tmp_path: Path) -> None:
    _copy(tmp_path, "capture_step.ipynb")
    text = run_cli("captures", "--no-cache", "capture_step.ipynb", cwd=tmp_path)
    assert text.stdout.startswith("capture_step.ipynb:cell 6:3: CUDA graph: torch.cuda.graph(g)\n")
    assert "runs capture_step.decode_step" in text.stdout  # the function of cell 4
    report = json.loads(
        run_cli("captures", "--no-cache", "--format", "json", "capture_step.ipynb", cwd=tmp_path).stdout
    )
    (region,) = report["regions"]
    assert (region["cell"], region["line"]) == (6, 3)
