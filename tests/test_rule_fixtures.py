"""Every rule's fixtures: findings must be exactly the lines marked `# expect: CODE`.

Cases are discovered from fixtures/rules/<CODE>/, one per `.py` file or sub-folder (a
sub-folder is one multi-file project: cross-file and wrapper cases). They run through the
real command line in JSON format, so line, column and code are checked as users see them.
Each case's full report is also compared with its committed snapshot beside it
(`<case>.snap`, see fixtures/rules/README.md): the markers say which lines are flagged,
the snapshot what is said about them.
"""

from __future__ import annotations

import io
import json
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from finding_snapshots import assert_matches_snapshot, render_findings
from graphlint.cli import main
from graphlint.registry import all_rules

RULES_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
_MARKER = re.compile(r"#\s*expect:\s*(?P<items>GL\d{3}(?:@\d+)?(?:\s*,\s*GL\d{3}(?:@\d+)?)*)")


def _cases() -> list:
    cases = []
    for rule_dir in sorted(p for p in RULES_DIR.iterdir() if p.is_dir()):
        for case in sorted(rule_dir.iterdir()):
            if case.suffix == ".py" or case.is_dir():
                cases.append(pytest.param(rule_dir.name, case, marks=_syntax_marks(case)))
    return cases


def _syntax_marks(case: Path) -> list:
    """`except*` parses from Python 3.11 on; on 3.10 such a fixture would be a GL000 case."""
    files = sorted(case.rglob("*.py")) if case.is_dir() else [case]
    if sys.version_info < (3, 11) and any("except*" in f.read_text(encoding="utf-8", errors="replace") for f in files):
        return [pytest.mark.skip(reason="except* needs Python 3.11")]
    return []


def _expected(case: Path, code: str) -> tuple[set[tuple[str, int, str]], dict[tuple[str, int, str], int]]:
    files = sorted(case.rglob("*.py")) if case.is_dir() else [case]
    expected: set[tuple[str, int, str]] = set()
    columns: dict[tuple[str, int, str], int] = {}
    for file in files:
        display = str(file.relative_to(case)) if case.is_dir() else case.name
        lines = file.read_bytes().decode("utf-8", "replace").splitlines()
        for number, line in enumerate(lines, start=1):
            match = _MARKER.search(line)
            if not match:
                continue
            for item in match.group("items").split(","):
                marked_code, _, column = item.strip().partition("@")
                if marked_code != code:
                    continue
                key = (display, number, marked_code)
                expected.add(key)
                if column:
                    columns[key] = int(column)
    return expected, columns


def _run(case: Path, code: str, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Every finding of the rule run alone, from the case's folder so that paths are relative.

    GL001 needs every code enabled, since it judges their suppressions.
    """
    out = io.StringIO()
    select = "GL" if code == "GL001" else code
    monkeypatch.chdir(case if case.is_dir() else case.parent)
    target = "." if case.is_dir() else case.name
    args = ["check", target, "--select", select, "--format", "json", "--no-cache", "--jobs", "1"]
    args.append("--preview")  # fixtures pin each rule's behaviour, in the default set or in preview
    with redirect_stdout(out):
        status = main(args)
    findings = json.loads(out.getvalue())
    assert status == (1 if findings else 0)
    return findings


def _snapshot_text(case: Path, code: str, findings: list[dict]) -> str:
    """The case's whole report; paths in it are relative to the case's folder (or the case)."""
    base = case if case.is_dir() else case.parent
    select = "GL" if code == "GL001" else code
    where = f"  (run inside {case.name}/)" if case.is_dir() else ""
    command = f"# graphlint check {'.' if case.is_dir() else case.name} --select {select} --preview{where}"

    def read(path: str) -> bytes | None:
        file = base / path
        return file.read_bytes() if file.is_file() else None

    return command + "\n" + render_findings(findings, read, root=str(base))


def _assert_markers(case: Path, code: str, findings: list[dict]) -> None:
    """The rule's findings are exactly the marked lines (and marked columns)."""
    __tracebackhide__ = True
    expected, columns = _expected(case, code)
    got = set()
    for finding in findings:
        path = finding["path"]
        if case.is_dir():
            path = str(Path(path))
        got.add((path, finding["line"], finding["code"]))
    missing = sorted(expected - got)
    unexpected = sorted(
        (f["path"], f["line"], f["code"], f["message"])
        for f in findings
        if (str(Path(f["path"])) if case.is_dir() else f["path"], f["line"], f["code"]) not in expected
    )
    assert not missing and not unexpected, f"missing: {missing}\nunexpected: {unexpected}"
    for finding in findings:
        path = str(Path(finding["path"])) if case.is_dir() else finding["path"]
        key = (path, finding["line"], finding["code"])
        if key in columns:
            assert finding["column"] == columns[key], finding


@pytest.mark.parametrize(("code", "case"), _cases(), ids=lambda value: value if isinstance(value, str) else value.name)
def test_fixture(code: str, case: Path, monkeypatch: pytest.MonkeyPatch, update_snapshots: bool) -> None:
    report = _run(case, code, monkeypatch)
    snapshot = case.with_name(case.name + ".snap")
    if update_snapshots:  # rewritten even where the markers fail, so the diff shows every change
        assert_matches_snapshot(snapshot, _snapshot_text(case, code, report), update=True)
    _assert_markers(case, code, [f for f in report if f["code"] == code])
    assert_matches_snapshot(snapshot, _snapshot_text(case, code, report), update=False)


def test_every_rule_has_fixtures_with_positives_and_negatives() -> None:
    """A rule is not done without fixtures: at least three positives and a negative file."""
    for code in all_rules():
        if code >= "GL500":
            continue  # runtime findings: tested on recorded snapshots and on the GPU
        if code == "GL002":
            continue  # no input may trigger it; tests/test_no_crash.py simulates graphlint's own failures
        rule_dir = RULES_DIR / code
        assert rule_dir.is_dir(), f"{code} has no fixtures"
        markers = 0
        for file in rule_dir.rglob("*.py"):
            try:
                text = file.read_bytes().decode("utf-8", "replace")
            except OSError:
                continue
            markers += len(re.findall(rf"#\s*expect:[^\n]*{code}", text))
        assert markers >= 3, f"{code}: only {markers} positive cases"
        assert any("negative" in p.name for p in rule_dir.iterdir()), f"{code}: no negatives file"


_OPENING = re.compile(r'^(#|""")\s*GL\d{3}\b\S*\s+\S')


def test_every_fixture_file_opens_with_what_it_tests() -> None:
    """Line 1 of each fixture file names the rule and says what the file tests."""
    for file in sorted(RULES_DIR.rglob("*.py")):
        first = file.read_bytes().decode("utf-8", "replace").partition("\n")[0]
        assert _OPENING.match(first), f"{file.relative_to(RULES_DIR)}: line 1 should say what it tests: {first!r}"


def test_every_snapshot_belongs_to_a_case() -> None:
    """A snapshot left behind by a renamed or deleted case would never be compared again."""
    cases = {param.values[1] for param in _cases()}
    for snapshot in sorted(RULES_DIR.rglob("*.snap")):
        assert snapshot.with_suffix("") in cases, f"{snapshot.relative_to(RULES_DIR)} has no fixture case beside it"


REAL_DIR = RULES_DIR.parent / "real"


def test_real_code_patterns_report_only_the_marked_hazards(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rule at once over real-code patterns: no finding that is not a marked true hazard."""
    out = io.StringIO()
    monkeypatch.chdir(REAL_DIR)
    with redirect_stdout(out):
        main(["check", ".", "--format", "json", "--no-cache", "--jobs", "1", "--preview"])
    findings = json.loads(out.getvalue())
    got = {(str(Path(f["path"])), f["line"], f["code"]) for f in findings}
    expected = set()
    for code in all_rules():
        expected |= _expected(REAL_DIR, code)[0]
    assert got == expected, [f for f in findings if (str(Path(f["path"])), f["line"], f["code"]) not in expected]
