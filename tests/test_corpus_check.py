"""The real-code corpus check's own logic: labels, comparison, injection (no download here)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("corpus_check", ROOT / "benchmarks" / "corpus.py")
corpus = importlib.util.module_from_spec(_spec)
sys.modules["corpus_check"] = corpus
_spec.loader.exec_module(corpus)

PKG = corpus.Package("demo", "1.0", "demo-1.0.whl", "0" * 64, ("demo",))


def _finding(line: int, code: str = "GL301", column: int = 5) -> dict:
    return {"path": "demo/m.py", "line": line, "column": column, "code": code, "message": "m"}


def _label(line: int, verdict: str, code: str = "GL301", column: int = 5) -> dict:
    return {
        "package": "demo",
        "path": "demo/m.py",
        "line": line,
        "column": column,
        "code": code,
        "verdict": verdict,
        "reason": "r",
    }


def _labels(*rows: dict) -> dict:
    return {corpus.label_key(r["package"], r): r for r in rows}


def test_unlabelled_findings_and_lost_true_findings_fail_the_check() -> None:
    outcome = corpus.Outcome(PKG, findings=[_finding(3), _finding(9)])
    labels = _labels(_label(3, "false"), _label(20, "true"), _label(30, "false"))
    comparison = corpus.compare([outcome], labels)
    assert [f["line"] for _, f in comparison.unlabelled] == [9]
    assert [label["line"] for label in comparison.lost_true] == [20]
    assert [label["line"] for label in comparison.gone_false] == [30]  # going quiet on a false finding is fine
    problems = corpus.failures([outcome], comparison, preview=set(), recall={})
    assert any(p.startswith("unlabelled: demo demo/m.py:9 GL301") for p in problems)
    assert any("a true finding disappeared: demo demo/m.py:20 GL301" in p for p in problems)


def test_two_findings_on_one_line_need_two_labels() -> None:
    outcome = corpus.Outcome(PKG, findings=[_finding(3, column=5), _finding(3, column=17)])
    comparison = corpus.compare([outcome], _labels(_label(3, "false", column=5)))
    assert [(f["line"], f["column"]) for _, f in comparison.unlabelled] == [(3, 17)]


def test_default_set_below_ninety_percent_fails_and_preview_rules_do_not_count() -> None:
    outcome = corpus.Outcome(PKG, findings=[_finding(1, "GL101"), _finding(2, "GL101"), _finding(3, "GL302")])
    labels = _labels(_label(1, "true", "GL101"), _label(2, "false", "GL101"), _label(3, "false", "GL302"))
    comparison = corpus.compare([outcome], labels)
    assert corpus.precision_table(comparison.verdicts, 4) == {"GL101": (1, 2), "GL302": (0, 1)}
    assert corpus.default_set_precision(comparison.verdicts, {"GL302"}) == (1, 2)
    assert any("below 90%" in p for p in corpus.failures([outcome], comparison, {"GL302"}, {}))
    labels = _labels(_label(1, "true", "GL101"), _label(2, "true", "GL101"), _label(3, "false", "GL302"))
    comparison = corpus.compare([outcome], labels)
    assert not corpus.failures([outcome], comparison, {"GL302"}, {})


def test_a_package_that_failed_to_run_does_not_count_its_true_labels_as_lost() -> None:
    broken = corpus.Outcome(PKG, problems=["graphlint check exited 1: boom"])
    comparison = corpus.compare([broken], _labels(_label(20, "true")))
    assert not comparison.lost_true
    assert any("exited 1" in p for p in corpus.failures([broken], comparison, set(), {}))


def test_labels_file_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({**_label(1, "maybe")}) + "\n")
    with pytest.raises(SystemExit, match="verdict must be"):
        corpus.load_labels(path)
    path.write_text(json.dumps({**_label(1, "false"), "reason": ""}) + "\n")
    with pytest.raises(SystemExit, match="needs a reason"):
        corpus.load_labels(path)
    path.write_text(json.dumps(_label(1, "false")) + "\n" + json.dumps(_label(1, "true")) + "\n")
    with pytest.raises(SystemExit, match="a second label"):
        corpus.load_labels(path)


def test_committed_labels_are_valid_and_cover_their_manifest() -> None:
    labels = corpus.load_labels()
    names = {p.name for p in corpus.load_manifest()}
    assert labels and all(key[0] in names for key in labels)
    assert all(label["verdict"] == "true" or label["cause"] for label in labels.values()), (
        "a false label names its cause"
    )
    second = corpus.load_labels(corpus.SECOND_READER)
    assert second and set(second) <= set(labels)
    assert {label["reader"] for label in second.values()}.isdisjoint({label["reader"] for label in labels.values()})


def test_values_labels_without_a_column_match_their_line_and_a_values_run_reports_precision_only(
    tmp_path: Path,
) -> None:
    """`--values` reads the labels of what the value reach adds; some were written before labels
    kept the column. Its default-set precision is reported, not held to the floor (#30)."""
    old = {key: value for key, value in _label(4, "false", "GL101").items() if key != "column"}
    path = tmp_path / "values.jsonl"
    path.write_text(json.dumps(old) + "\n")
    labels = corpus.load_labels(path, any_column=True)
    outcome = corpus.Outcome(PKG, findings=[_finding(4, "GL101", column=9), _finding(5, "GL101", column=1)])
    comparison = corpus.compare([outcome], {**labels, **_labels(_label(5, "true", "GL101", column=1))})
    assert not comparison.unlabelled and not comparison.gone_false
    assert corpus.default_set_precision(comparison.verdicts, set()) == (1, 2)
    assert any("below 90%" in p for p in corpus.failures([outcome], comparison, set(), {}))
    assert not corpus.failures([outcome], comparison, set(), {}, floor=False)


def test_committed_values_labels_are_valid_and_read_once() -> None:
    labels = corpus.values_labels()  # raises on a finding labelled in both files
    added = corpus.load_labels(corpus.VALUES_LABELS, any_column=True)
    assert added and set(added) <= set(labels)
    assert all(label["verdict"] == "true" or label["cause"] for label in added.values()), (
        "a false label names its cause"
    )


def test_injection_goes_after_its_anchor_with_the_right_indentation() -> None:
    source = "def f(x):\n    y = x + 1\n    return y\n"
    injection = corpus.Injection("i", "demo", "m.py", "y = x + 1", "z = y.item()", "GL101", "why")
    text, line = corpus.inject(source, injection)
    assert line == 3 and text.splitlines()[2] == "    z = y.item()"
    block = corpus.Injection("i", "demo", "m.py", "with torch.cuda.graph(g):", "x.item()", "GL101", "why")
    text, line = corpus.inject("def f():\n    with torch.cuda.graph(g):\n        pass\n", block)
    assert text.splitlines()[line - 1] == "        x.item()"
    with pytest.raises(ValueError, match="anchor found 0 times"):
        corpus.inject(source, corpus.Injection("i", "demo", "m.py", "nope", "x", "GL101", "why"))


def test_a_hazard_injection_that_was_found_must_stay_found(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = corpus.Injection("kept", "demo", "m.py", "a", "b", "GL101", "why", found=True)
    monkeypatch.setattr(corpus, "load_injections", lambda path=None: [kept])
    problems = corpus.failures([], corpus.Comparison(), set(), {"kept": False})
    assert problems == ["an injected hazard is no longer found: kept (GL101)"]


def test_agreement_between_readers() -> None:
    first = _labels(_label(1, "false"), _label(2, "true"))
    first[corpus.label_key("demo", _label(1, "false"))]["cause"] = "stream-identity"
    second = _labels({**_label(1, "false"), "cause": "stream-identity"}, _label(2, "false"))
    assert corpus.agreement(first, second) == (1, 1, 2)


def test_default_rules_with_few_corpus_findings_say_why_they_stay_and_noisy_ones_are_preview() -> None:
    from graphlint.registry import all_rules

    labels = corpus.load_labels()
    for code, rule in all_rules().items():
        if not ("GL100" < code < "GL500"):
            continue
        # what the default mode reports: a default-set rule's preview behaviour counts apart
        decided = [label for key, label in labels.items() if key[4] == code and not label.get("preview")]
        true = sum(label["verdict"] == "true" for label in decided)
        if decided and true / len(decided) < corpus.PRECISION_FLOOR:
            assert rule.preview, f"{code}: {true}/{len(decided)} on the corpus must be preview"
        page = " ".join(rule.doc_page().split())
        if not rule.preview and len(decided) < 5:
            assert "In the default set: " in page, f"{code}: fewer than 5 corpus findings and no stated reason"
        if rule.preview:
            assert rule.preview_reason and f"of its {len(decided)} labelled findings" in page


def _reach_module():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("corpus_reach_check", ROOT / "benchmarks" / "corpus_reach.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_checked_reading_that_no_longer_matches_the_report_is_stale(tmp_path: Path) -> None:
    reach = _reach_module()
    callable_ = {"expression": "run", "status": "resolved", "targets": ["demo.m.run"], "detail": ""}
    report = {"demo-1.0": {"regions": [{"path": "demo/m.py", "line": 3, "callables": [callable_]}]}}
    entry = {"package": "demo-1.0", "region": "demo/m.py:3", "expression": "run", "resolved": ["demo.m.run"]}
    sample = tmp_path / "sample.jsonl"
    sample.write_text(json.dumps(entry) + "\n" + json.dumps({**entry, "package": "other-2.0"}) + "\n")
    assert reach.stale_readings(report, sample) == []  # a package not run is not judged
    callable_["targets"] = ["demo.m.run", "demo.m.other"]
    (stale,) = reach.stale_readings(report, sample)
    assert "now resolved ['demo.m.other', 'demo.m.run']" in stale
    callable_["status"], callable_["targets"] = "outside", []
    assert "now outside" in reach.stale_readings(report, sample)[0]
    report["demo-1.0"]["regions"][0]["line"] = 4
    assert reach.stale_readings(report, sample) == ["demo-1.0 demo/m.py:3 run: no such callable in the report"]
