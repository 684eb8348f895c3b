"""Every rule's page is tested, as Fixit tests a rule's VALID and INVALID cases: the page's
"Example" fires its rule and its "Use instead" gives no finding at all.

Each snippet is taken from the page as `graphlint rule CODE` prints it (its ```python block),
written to a file unchanged and checked through the real command line: whatever context a
snippet needs (imports, the capture around it) must be on the page, where the user sees it.
The mode is the one a user of the rule runs: a rule in preview with `--preview` (it reports
nothing otherwise), a rule in the default set in the default mode, with nothing selected.
"""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from graphlint.cli import main
from graphlint.registry import Rule, all_rules

_BLOCK = re.compile(r"^## (?P<section>Example|Use instead)\n\n```python\n(?P<code>.*?)\n```$", re.M | re.S)


def _static_rules() -> list[Rule]:
    """The rules `graphlint check` reports. GL002 is graphlint's own failure, which no input
    may cause; GL5xx are the runtime sanitizer's, found by running code on a GPU."""
    return [rule for code, rule in all_rules().items() if code < "GL500" and code != "GL002"]


def _snippets(rule: Rule) -> dict[str, str]:
    """The page's code blocks, by section, exactly as printed."""
    found = {m.group("section"): m.group("code") + "\n" for m in _BLOCK.finditer(rule.doc_page())}
    assert set(found) == {"Example", "Use instead"}, f"{rule.code}: page without both code blocks"
    return found


def _check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rule: Rule, source: str) -> list[dict]:
    """The findings of `graphlint check page.py`, in the rule's mode, from the file's folder."""
    (tmp_path / "page.py").write_text(source, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    args = ["check", "page.py", "--format", "json", "--no-cache", "--jobs", "1"]
    if rule.preview:
        args.append("--preview")
    out = io.StringIO()
    with redirect_stdout(out):
        main(args)
    return json.loads(out.getvalue())


@pytest.mark.parametrize("rule", _static_rules(), ids=lambda rule: rule.code)
def test_example_fires_its_rule(rule: Rule, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    findings = _check(tmp_path, monkeypatch, rule, _snippets(rule)["Example"])
    assert rule.code in {f["code"] for f in findings}, f"{rule.code}'s example gives only {findings}"


@pytest.mark.parametrize("rule", _static_rules(), ids=lambda rule: rule.code)
def test_use_instead_gives_nothing(rule: Rule, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    findings = _check(tmp_path, monkeypatch, rule, _snippets(rule)["Use instead"])
    assert findings == [], f"{rule.code}'s use-instead block is flagged: {findings}"


def test_every_static_rule_has_a_page_under_test() -> None:
    """A rule added to the registry is picked up here, not silently left untested."""
    codes = {rule.code for rule in _static_rules()}
    assert {"GL000", "GL001", "GL101", "GL204", "GL303"} <= codes
    assert len([c for c in codes if "GL100" < c < "GL400"]) == 20
