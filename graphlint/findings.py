"""The one findings type shared by the static checker, the runtime sanitizer and every reporter.

Keeping a single, plain data type means suppressions, reporters, the cache and CI
integrations work the same for a `.item()` found in source and for a stale-output read
found at runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from graphlint.fixing.ops import FixOperation

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True, order=True)
class Edit:
    """Replace the text between two 1-based (line, column) positions with ``content``."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "content": self.content,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Edit:
        return cls(data["line"], data["column"], data["end_line"], data["end_column"], data["content"])


@dataclass(frozen=True)
class Fix:
    """How to repair one finding; ``safe`` fixes keep behaviour.

    ``operations`` are what the rule asks for (libcst transformations, applied by
    `graphlint.fixing.apply`); ``edits`` are the same change as text, for the JSON and SARIF
    reports and the language server. A rule never writes edits: they are derived from the
    operations (`fix_engine.with_edits`) only for findings shown with them, so a plain
    check never parses a file with libcst.
    """

    applicability: str  # "safe" | "unsafe"
    message: str
    operations: tuple[FixOperation, ...] = ()
    edits: tuple[Edit, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "applicability": self.applicability,
            "message": self.message,
            "edits": [edit.to_dict() for edit in self.edits],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Fix | None:
        if data is None:
            return None
        edits = tuple(Edit.from_dict(e) for e in data["edits"])
        return cls(data["applicability"], data["message"], edits=edits)  # text only: nothing to apply


@dataclass(frozen=True, order=True)
class CallSite:
    """One hop of an interprocedural path: the call at ``path:line`` inside ``function``.

    Ordered (path, line, function) so that call paths, tuples of these, sort: the project
    phase picks the shortest path to each function by sorting candidate paths.
    """

    path: str
    line: int
    function: str
    cell: int | None = None  # in a notebook, once shown: the cell, and ``line`` is the line in it

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "line": self.line, "function": self.function}
        if self.cell is not None:
            data["cell"] = self.cell
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallSite:
        return cls(data["path"], data["line"], data["function"], data.get("cell"))

    @property
    def where(self) -> str:
        """``model.py:88``, or ``nb.ipynb:cell 3:5`` in a notebook."""
        return f"{self.path}:{cell_prefix(self.cell)}{self.line}"


def cell_prefix(cell: int | None) -> str:
    """``cell 3:`` before a line number in a notebook's cell, else nothing."""
    return f"cell {cell}:" if cell is not None else ""


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    severity: str
    message: str
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    fix: Fix | None = None
    call_path: tuple[CallSite, ...] = field(default=())
    # A finding of a default-set rule that only preview mode reports: a newer behaviour of
    # the rule, below the 90% bar on the corpus (ruff's "preview behaviour" of a stable rule).
    preview: bool = False
    # In a notebook, once located for a report (`notebooks.locate_in_cells`): the 1-based cell,
    # every cell counted; the lines are then the cell's own. The analysis never sets it.
    cell: int | None = None

    @classmethod
    def of(
        cls,
        rule: Any,
        message: str,
        path: str,
        span: tuple[int, int, int, int],
        fix: Fix | None = None,
        call_path: tuple[CallSite, ...] = (),
        preview: bool = False,
    ) -> Finding:
        """The one way to make a finding of ``rule`` (a `registry.Rule`) at a 1-based ``span``.

        A finding only preview mode reports (a preview rule's, or a rule's preview behaviour) is
        below the precision bar: on real code it is often false, and a fix of a false finding
        changes a correct program, so its fix is never applied without `--unsafe-fixes`."""
        line, column, end_line, end_column = span
        if fix is not None and fix.applicability == "safe" and (preview or rule.preview):
            fix = replace(fix, applicability="unsafe")
        return cls(
            rule.code,
            rule.name,
            rule.severity,
            message,
            path,
            line,
            column,
            end_line,
            end_column,
            fix,
            call_path,
            preview and not rule.preview,  # a preview rule's findings are all preview: its code says so
        )

    @property
    def where(self) -> str:
        """``path:line:column``, or ``path:cell N:line:column`` in a notebook."""
        return f"{self.path}:{cell_prefix(self.cell)}{self.line}:{self.column}"

    @property
    def cell_note(self) -> str:
        """``cell N: `` for the formats whose location has no room for a cell, else nothing."""
        return f"cell {self.cell}: " if self.cell is not None else ""

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.path, self.line, self.column, self.code, self.message)

    @property
    def informational(self) -> bool:
        """An `info` finding (GL508) states a fact; it never fails a run that fails on findings."""
        return self.severity == "info"

    @property
    def safely_fixable(self) -> bool:
        """`--fix` alone repairs it; an unsafe fix needs `--unsafe-fixes` and is not marked `[*]`."""
        return self.fix is not None and self.fix.applicability == "safe"

    def to_dict(self) -> dict[str, Any]:
        data = {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "fix": self.fix.to_dict() if self.fix else None,
            "call_path": [site.to_dict() for site in self.call_path],
        }
        if self.preview:  # only then: a default-mode report is the same as before the key existed
            data["preview"] = True
        if self.cell is not None:  # a notebook's finding only, as `preview`
            data["cell"] = self.cell
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(
            code=data["code"],
            name=data["name"],
            severity=data["severity"],
            message=data["message"],
            path=data["path"],
            line=data["line"],
            column=data["column"],
            end_line=data["end_line"],
            end_column=data["end_column"],
            fix=Fix.from_dict(data.get("fix")),
            call_path=tuple(CallSite.from_dict(s) for s in data.get("call_path", ())),
            preview=bool(data.get("preview", False)),
            cell=data.get("cell"),
        )

    def call_path_text(self) -> str:
        """``called in capture via train.py:41 -> model.py:88`` or ``""``."""
        if not self.call_path:
            return ""
        hops = " -> ".join(site.where for site in self.call_path)
        return f"called in capture via {hops}"


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """The one order every reporter uses: path, line, column, code."""
    return sorted(findings, key=Finding.sort_key)
