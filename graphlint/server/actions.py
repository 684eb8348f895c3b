"""The language server's code actions: a finding's own fix, "suppress on this line" and
`source.fixAll`, each an edit of the document the last analysis read.

Suppression writes what `graphlint check --add-noqa` writes (`fixing.add_noqa`); fix-all
applies the safe fixes `graphlint check --fix` applies (`fixing.apply`, computed by the
worker with the analysis). Edits are made only against the text the findings came from, and
positions count UTF-16 code units, as LSP's do by default.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lsprotocol import types

from graphlint.findings import Finding
from graphlint.fixing.add_noqa import add_noqa

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def lines(text: str) -> list[str]:
    """The lines of ``text`` with their endings, split where LSP splits (not at form feeds)."""
    return _LINE.findall(text)


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def position_range(line: int, column: int, end_line: int, end_column: int) -> types.Range:
    """A 1-based span as an LSP range."""
    return types.Range(
        start=types.Position(line=line - 1, character=column - 1),
        end=types.Position(line=end_line - 1, character=end_column - 1),
    )


def wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether the client asked for actions of ``kind`` (`only` names kinds or their parents)."""
    return only is None or any(kind == asked or kind.startswith(f"{asked}.") for asked in only)


def quick_fix(uri: str, diagnostic: types.Diagnostic) -> types.CodeAction | None:
    """The finding's own fix, carried in the diagnostic's data."""
    fix: Any = (diagnostic.data or {}).get("fix") if isinstance(diagnostic.data, dict) else None
    if diagnostic.source != "graphlint" or not fix:
        return None
    edits = [
        types.TextEdit(
            range=position_range(e["line"], e["column"], e["end_line"], e["end_column"]), new_text=e["content"]
        )
        for e in fix["edits"]
    ]
    unsafe = fix["applicability"] != "safe"
    return types.CodeAction(
        title=f"{diagnostic.code}: {fix['message']}" + (" (unsafe fix)" if unsafe else ""),
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        is_preferred=not unsafe,
        edit=types.WorkspaceEdit(changes={uri: edits}),
    )


def suppress_title(code: str) -> str:
    return f"{code}: suppress on this line (# noqa: {code})"


def suppression(uri: str, text: str, finding: Finding) -> types.WorkspaceEdit | None:
    """The edit that suppresses ``finding`` where it is, as `--add-noqa` would; None when its
    line cannot carry a comment or the code is never suppressed (GL000, GL001, GL002)."""
    outcome = add_noqa(text, [finding])
    if outcome.error or not outcome.added:
        return None
    old_line = lines(text)[finding.line - 1].rstrip("\r\n")
    new_line = lines(outcome.text)[finding.line - 1].rstrip("\r\n")
    where = types.Range(
        start=types.Position(line=finding.line - 1, character=0),
        end=types.Position(line=finding.line - 1, character=utf16_length(old_line)),
    )
    return types.WorkspaceEdit(changes={uri: [types.TextEdit(range=where, new_text=new_line)]})


def fix_all(uri: str, text: str, fixed: str) -> types.CodeAction:
    """`source.fixAll`: one edit replacing the lines from the first that differs to the last."""
    old, new = lines(text), lines(fixed)
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    where = types.Range(
        start=types.Position(line=head, character=0),
        end=_end_of(old[: len(old) - tail]),
    )
    edit = types.TextEdit(range=where, new_text="".join(new[head : len(new) - tail]))
    return types.CodeAction(
        title="graphlint: apply all safe fixes",
        kind=types.CodeActionKind.SourceFixAll,
        edit=types.WorkspaceEdit(changes={uri: [edit]}),
    )


def _end_of(kept: list[str]) -> types.Position:
    """The position just after ``kept`` (the start of the next line when the last one ends)."""
    if not kept:
        return types.Position(line=0, character=0)
    last = kept[-1]
    if last.endswith(("\n", "\r")):
        return types.Position(line=len(kept), character=0)
    return types.Position(line=len(kept) - 1, character=utf16_length(last))
