"""Fix operations on libcst's tree: what survives each rewrite, and the text edits derived from it."""

from __future__ import annotations

import ast
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphlint.findings import Edit, Finding, Fix
from graphlint.fixing.edits import FixError, apply_operations, text_edit, with_edits
from graphlint.fixing.ops import (
    AppendMethodCall,
    FixOperation,
    InsertStatementAfter,
    ReplaceAssignWithCopy,
    SetKeyword,
)


def span_of(text: str, snippet: str, occurrence: int = 0) -> tuple[int, int, int, int]:
    """The span of the ``occurrence``-th ``snippet`` in ``text``: 1-based, columns in characters."""
    offset = -1
    for _ in range(occurrence + 1):
        offset = text.index(snippet, offset + 1)
    end = offset + len(snippet)
    return (*_position(text, offset), *_position(text, end))


def _position(text: str, offset: int) -> tuple[int, int]:
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def apply_edit(text: str, edit: Edit) -> str:
    """What an editor does with the edit; lines end at "\\n", as graphlint's positions count them."""
    starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]
    start = starts[edit.line - 1] + edit.column - 1
    end = starts[edit.end_line - 1] + edit.end_column - 1
    return text[:start] + edit.content + text[end:]


def _op(kind: str, text: str, snippet: str) -> FixOperation:
    span = span_of(text, snippet)
    return {
        "clone": lambda: AppendMethodCall(span, "clone"),
        "copy": lambda: ReplaceAssignWithCopy(span),
        "capturable": lambda: SetKeyword(span, "capturable", "True"),
        "record": lambda: InsertStatementAfter(span, "x.record_stream(s)"),
    }[kind]()


CASES = [
    # (operation, source, the node's text, expected result)
    ("clone", "out = (static_out)  # keep it\n", "static_out", "out = (static_out).clone()  # keep it\n"),
    (
        "clone",
        "results.append(\n    model(x,  # why\n          y),\n)\n",
        "model(x,  # why\n          y)",
        "results.append(\n    model(x,  # why\n          y).clone(),\n)\n",
    ),
    ("clone", "é = f'ünï' + y; keep(stätic)\n", "stätic", "é = f'ünï' + y; keep(stätic.clone())\n"),
    ("clone", "a = x if c else y\n", "x if c else y", "a = (x if c else y).clone()\n"),
    (
        "copy",
        "if c:\n    static_x = batch  # new batch\n",
        "static_x = batch",
        "if c:\n    static_x.copy_(batch)  # new batch\n",
    ),
    (
        "copy",
        "static_x = (batch +\n            1)  # c\n",
        "static_x = (batch +\n            1)",
        "static_x.copy_((batch +\n            1))  # c\n",
    ),
    ("copy", "ü = 1; static_x = a, b\n", "static_x = a, b", "ü = 1; static_x.copy_((a, b))\n"),
    ("capturable", "opt = Adam(p, lr=1e-3,)\n", "Adam(p, lr=1e-3,)", "opt = Adam(p, lr=1e-3, capturable=True,)\n"),
    ("capturable", "opt = Adam()\n", "Adam()", "opt = Adam(capturable=True)\n"),
    (
        "capturable",
        "opt = Adam(\n    p,\n    lr=1e-3,  # tuned\n)\n",
        "Adam(\n    p,\n    lr=1e-3,  # tuned\n)",
        "opt = Adam(\n    p,\n    lr=1e-3,  # tuned\n    capturable=True,\n)\n",
    ),
    (
        "capturable",
        "opt = Adam(p,  # params\n           lr=1e-3)\n",
        "Adam(p,  # params\n           lr=1e-3)",
        "opt = Adam(p,  # params\n           lr=1e-3,\n           capturable=True)\n",
    ),
    (
        "capturable",
        "opt = Adam(p, capturable=False)  # c\n",
        "Adam(p, capturable=False)",
        "opt = Adam(p, capturable=True)  # c\n",
    ),
    ("capturable", "ñ = (Adam(p))\n", "Adam(p)", "ñ = (Adam(p, capturable=True))\n"),
    (
        "record",
        "def f():\n    y = x.sum()  # use\n\n    # later\n    return y\n",
        "y = x.sum()",
        "def f():\n    y = x.sum()  # use\n    x.record_stream(s)\n\n    # later\n    return y\n",
    ),
    ("record", "if c: y = x.sum()\n", "y = x.sum()", "if c: y = x.sum(); x.record_stream(s)\n"),
    ("record", "y = x.sum(); z = 1\n", "y = x.sum()", "y = x.sum(); x.record_stream(s); z = 1\n"),
    (
        "record",
        "for b in bs:\n    y = x + b\nreturn_value = y\n",
        "for b in bs:\n    y = x + b",
        "for b in bs:\n    y = x + b\nx.record_stream(s)\nreturn_value = y\n",
    ),
]


@pytest.mark.parametrize(("kind", "source", "node", "expected"), CASES)
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_operation_keeps_everything_it_does_not_touch(
    kind: str, source: str, node: str, expected: str, newline: str
) -> None:
    source, node, expected = (text.replace("\n", newline) for text in (source, node, expected))
    operation = _op(kind, source, node)
    fixed = apply_operations(source, [operation])
    assert fixed == expected
    ast.parse(fixed)
    finding = Finding("GL201", "n", "error", "m", "a.py", 1, 1, 1, 1, Fix("safe", "m", (operation,)))
    (shown,) = with_edits([finding], {"a.py": source.encode("utf-8")})
    (edit,) = shown.fix.edits
    assert apply_edit(source, edit) == expected
    assert "\r" not in edit.content or "\r\n" in edit.content  # a CRLF is never split


def test_operations_on_nested_nodes_compose_in_one_pass() -> None:
    source = "keep(Adam(p),  # c\n)\n"
    call = span_of(source, "Adam(p)")
    fixed = apply_operations(source, [SetKeyword(call, "capturable", "True"), AppendMethodCall(call, "clone")])
    assert fixed == "keep(Adam(p, capturable=True).clone(),  # c\n)\n"


@pytest.mark.parametrize(
    ("source", "operation", "why"),
    [
        ("x = f(1)\n", AppendMethodCall((1, 5, 1, 8), "clone"), "not there"),  # `f(1` is no expression
        ("x = f(1)\n", ReplaceAssignWithCopy((1, 5, 1, 9)), "not there"),  # a call is no assignment
        ("x = f(1)\n", SetKeyword((1, 5, 1, 9), "k", "1 +"), "not a Python expression"),
        ("x = f(1)\n", InsertStatementAfter((1, 1, 1, 9), "if a: b"), "not one simple statement"),
        ("x = f(1\n", AppendMethodCall((1, 5, 1, 8), "clone"), "libcst cannot parse"),
    ],
)
def test_an_operation_that_cannot_be_carried_out_raises(source: str, operation: FixOperation, why: str) -> None:
    with pytest.raises(FixError, match=why):
        apply_operations(source, [operation])


def test_edits_are_derived_only_for_files_with_fixes(monkeypatch: pytest.MonkeyPatch) -> None:
    import libcst

    parsed: list[str] = []
    real_parse = libcst.parse_module
    monkeypatch.setattr(libcst, "parse_module", lambda text, *a, **k: parsed.append(text) or real_parse(text, *a, **k))
    fixed = Finding(
        "GL201", "n", "error", "m", "a.py", 1, 1, 1, 1, Fix("safe", "m", (AppendMethodCall((1, 5, 1, 6), "clone"),))
    )
    plain = Finding("GL101", "n", "error", "m", "b.py", 1, 1, 1, 1)
    gone = Finding("GL201", "n", "error", "m", "c.py", 1, 1, 1, 1, fixed.fix)
    shown = with_edits([plain, fixed, gone], {"a.py": b"y = x\n", "b.py": b"y = x\n"})
    assert parsed == ["y = x\n"]
    assert shown[0] is plain
    assert shown[1].fix.to_dict()["edits"] == [
        {"line": 1, "column": 6, "end_line": 1, "end_column": 6, "content": ".clone()"}
    ]
    assert shown[2].fix.edits == ()  # no text to derive them from: nothing for tooling to apply


def test_findings_with_operations_pickle_small() -> None:
    """Summaries hold fixes and are pickled into the cache: no libcst object may ride along."""
    fix = Fix("unsafe", "m", (SetKeyword((3, 7, 5, 2), "capturable", "True"),))
    finding = Finding("GL106", "n", "error", "m", "a.py", 3, 7, 5, 2, fix)
    data = pickle.dumps(finding)
    assert pickle.loads(data) == finding
    assert b"libcst" not in data


_TEXT = st.text(alphabet="ab_ \r\n(é", max_size=30)


@given(before=_TEXT, after=_TEXT)
def test_text_edit_turns_before_into_after(before: str, after: str) -> None:
    edit = text_edit(before, after)
    if edit is None:
        assert before == after
        return
    assert apply_edit(before, edit) == after
