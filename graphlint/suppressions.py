"""Suppression comments: `# noqa`, `# noqa: GL101`, `# graphlint: ignore[GL101]`, skip-file,
and blocks: `# graphlint: disable[GL301]` ... `# graphlint: enable[GL301]` (as ruff's range
suppressions; without an `enable` the block runs to the end of the file).

Comments are found with a per-line scan rather than a tokenizer: tokenizing costs about as
much as parsing, and most files carry no suppression at all. A `#` that sits inside a
string literal on its line, or inside a multi-line string, is not a comment.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_NOQA = re.compile(
    r"#\s*noqa(?P<sep>\s*:\s*(?P<codes>[A-Za-z]+[0-9]+(?:\s*,\s*[A-Za-z]+[0-9]+|\s+[A-Za-z]+[0-9]+)*))?", re.I
)
_IGNORE = re.compile(r"#\s*graphlint\s*:\s*ignore(?:\[(?P<codes>[^\]]*)\])?")
_SKIP_FILE = re.compile(r"#\s*graphlint\s*:\s*skip-file\b")
_BLOCK = re.compile(r"#\s*graphlint\s*:\s*(?P<action>disable|enable)\[(?P<codes>[^\]]*)\]")
_CODE = re.compile(r"[A-Za-z]+[0-9]+")


@dataclass(frozen=True)
class Suppression:
    line: int
    column: int  # 1-based column of the comment
    end_column: int
    codes: frozenset[str] | None  # None: every code on the line

    def covers(self, code: str) -> bool:
        return self.codes is None or code in self.codes


@dataclass(frozen=True)
class SuppressedBlock:
    """``code`` is suppressed from the `disable` comment's line to its `enable`'s (inclusive)."""

    start: int
    end: int
    column: int  # 1-based column of the `disable` comment
    end_column: int
    code: str

    def covers(self, line: int, code: str) -> bool:
        return self.start <= line <= self.end and code == self.code


@dataclass
class FileSuppressions:
    by_line: dict[int, Suppression]
    skip_file: bool
    blocks: tuple[SuppressedBlock, ...] = ()


def _in_string_on_line(line: str, position: int) -> bool:
    prefix = line[:position].replace("\\\\", "").replace("\\'", "").replace('\\"', "")
    return prefix.count('"') % 2 == 1 or prefix.count("'") % 2 == 1


def _is_multiline_string(node: ast.AST) -> bool:
    if not isinstance(node, (ast.Constant, ast.JoinedStr)) or (node.end_lineno or node.lineno) <= node.lineno:
        return False
    return isinstance(node, ast.JoinedStr) or isinstance(node.value, (str, bytes))


class _StringLines:
    """Which lines lie inside a string that spans lines (a `# noqa` there is text, not a
    comment). Most files have a few comment lines to ask about and thousands of nodes, so a
    line is answered by descending only into the nodes that span it; past a few questions
    the whole tree is walked once instead."""

    _DESCENTS = 16

    def __init__(self, tree: ast.AST | None) -> None:
        self.tree = tree
        self.asked = 0
        self.lines: set[int] | None = None

    def __contains__(self, line: int) -> bool:
        if self.tree is None:
            return False
        self.asked += 1
        if self.lines is None and self.asked > self._DESCENTS:
            self.lines = {
                number
                for node in ast.walk(self.tree)
                if _is_multiline_string(node)
                for number in range(node.lineno, (node.end_lineno or node.lineno) + 1)  # type: ignore[attr-defined]
            }
        if self.lines is not None:
            return line in self.lines
        return self._spans(line)

    def _spans(self, line: int) -> bool:
        stack = [self.tree]
        while stack:
            for child in ast.iter_child_nodes(stack.pop()):  # type: ignore[arg-type]
                start = getattr(child, "lineno", None)
                decorators = getattr(child, "decorator_list", None)
                if decorators:  # a definition's span starts at `def`, after its decorators
                    start = min(start, decorators[0].lineno)
                if start is None:  # arguments, a `with` item, a case: no span of their own
                    stack.append(child)
                elif start <= line <= (getattr(child, "end_lineno", None) or start):
                    if _is_multiline_string(child):
                        return True
                    stack.append(child)
        return False


def parse_suppressions(source: str, tree: ast.AST | None) -> FileSuppressions:
    if "noqa" not in source and "graphlint" not in source:
        return FileSuppressions({}, False)
    string_lines: _StringLines | None = None
    by_line: dict[int, Suppression] = {}
    skip_file = False
    blocks = _Blocks()
    number = 0
    for number, line in enumerate(source.splitlines(), start=1):
        if "#" not in line:
            continue
        matches = [m for m in (_NOQA.search(line), _IGNORE.search(line), _SKIP_FILE.search(line)) if m]
        block = _BLOCK.search(line) if "able[" in line else None
        if not matches and block is None:
            continue
        if string_lines is None:
            string_lines = _StringLines(tree)
        if block is not None and not (number in string_lines or _in_string_on_line(line, block.start())):
            blocks.comment(number, block, len(line) + 1)
        for match in matches:
            if number in string_lines or _in_string_on_line(line, match.start()):
                continue
            if match.re is _SKIP_FILE:
                skip_file = True
                continue
            raw = match.group("codes")
            codes = frozenset(c.upper() for c in _CODE.findall(raw)) if raw else None
            if match.re is _IGNORE and raw is not None and not codes:
                codes = None
            previous = by_line.get(number)
            if previous is not None:
                codes = None if previous.codes is None or codes is None else previous.codes | codes
            by_line[number] = Suppression(number, match.start() + 1, len(line) + 1, codes)
    return FileSuppressions(by_line, skip_file, blocks.close(number))


class _Blocks:
    """The open `disable` comments by code, closed by an `enable` of that code or the file's end."""

    def __init__(self) -> None:
        self.open: dict[str, tuple[int, int, int]] = {}  # code -> (line, column, end column)
        self.done: list[SuppressedBlock] = []

    def comment(self, number: int, match: re.Match[str], end_column: int) -> None:
        for code in (c.upper() for c in _CODE.findall(match.group("codes"))):
            if match.group("action") == "disable":
                self.open.setdefault(code, (number, match.start() + 1, end_column))
            elif code in self.open:
                start, column, end = self.open.pop(code)
                self.done.append(SuppressedBlock(start, number, column, end, code))

    def close(self, last_line: int) -> tuple[SuppressedBlock, ...]:
        for code, (start, column, end) in self.open.items():
            self.done.append(SuppressedBlock(start, last_line, column, end, code))
        return tuple(sorted(self.done, key=lambda b: (b.start, b.code)))
