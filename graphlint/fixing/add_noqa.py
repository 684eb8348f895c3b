"""`--add-noqa` (ruff's): suppress every current finding in place, to adopt graphlint on a
large repository and fix the hazards over time.

A `# noqa: CODE` goes at the end of the line the finding is on, merged into a `# noqa: ...`
that is already there. A line whose end is not a place for a comment (inside a multi-line
string, after a backslash continuation) is skipped and counted, never broken; the result must
parse (`fixes.parses`) or the file is left alone.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

from graphlint.core_rules import INTERNAL_ERROR, PARSE_ERROR, UNUSED_SUPPRESSION
from graphlint.findings import Finding
from graphlint.fixing.apply import parses

_NOQA_CODES = re.compile(r"#\s*noqa(?:\s*:\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?", re.I)
_CODE = re.compile(r"[A-Za-z]+[0-9]+")
# A suppression of GL000 (the file does not parse), GL001 (a stale suppression) or GL002
# (graphlint itself failed; never suppressed) makes no sense.
_NOT_SUPPRESSIBLE = {PARSE_ERROR.code, UNUSED_SUPPRESSION.code, INTERNAL_ERROR.code}


@dataclass
class NoqaResult:
    text: str
    added: int  # lines that got a new or extended noqa comment
    skipped: list[int]  # lines that cannot carry a comment
    error: str | None = None


def _comment_lines(text: str) -> tuple[set[int], dict[int, tokenize.TokenInfo]]:
    """Lines whose end may take a comment, and the comment already on each line."""
    safe: set[int] = set()
    in_strings: set[int] = set()
    comments: dict[int, tokenize.TokenInfo] = {}
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.NEWLINE, tokenize.NL):
            safe.add(token.start[0])
        elif token.type == tokenize.COMMENT:
            comments[token.start[0]] = token
            safe.add(token.start[0])
        elif token.start[0] != token.end[0]:  # a multi-line string: suppressions skip its lines
            in_strings.update(range(token.start[0], token.end[0] + 1))
    return safe - in_strings, comments


def _with_codes(line: str, comment: tokenize.TokenInfo | None, codes: list[str]) -> str | None:
    """``line`` (no line ending) carrying ``codes`` in its `# noqa`; None if it already covers them."""
    if comment is None:
        return f"{line.rstrip()}  # noqa: {', '.join(codes)}"
    match = _NOQA_CODES.search(comment.string)
    if match is None:
        return f"{line.rstrip()}  # noqa: {', '.join(codes)}"
    if match.group("codes") is None:
        return None  # a bare noqa comment covers every code already
    existing = _CODE.findall(match.group("codes"))
    merged = existing + [code for code in codes if code.upper() not in {c.upper() for c in existing}]
    new_comment = comment.string[: match.start()] + f"# noqa: {', '.join(merged)}" + comment.string[match.end() :]
    start = comment.start[1]
    return line[:start] + new_comment + line[start + len(comment.string) :]


def add_noqa(text: str, findings: list[Finding]) -> NoqaResult:
    """``text`` with a `# noqa` for each finding of one file."""
    wanted: dict[int, list[str]] = {}
    for finding in findings:
        if finding.code not in _NOT_SUPPRESSIBLE and finding.code not in wanted.setdefault(finding.line, []):
            wanted[finding.line].append(finding.code)
    wanted = {line: sorted(codes) for line, codes in wanted.items() if codes}
    try:
        safe, comments = _comment_lines(text)
    except (tokenize.TokenError, SyntaxError) as error:
        return NoqaResult(text, 0, [], error=f"cannot tokenize: {error}")
    lines = text.splitlines(keepends=True)
    added, skipped = 0, []
    for number, codes in sorted(wanted.items()):
        if number not in safe or number > len(lines):
            skipped.append(number)
            continue
        body = lines[number - 1].rstrip("\r\n")
        ending = lines[number - 1][len(body) :]
        new = _with_codes(body, comments.get(number), codes)
        if new is not None:
            lines[number - 1] = new + ending
            added += 1
    result = "".join(lines)
    problem = parses(text, result) if added else None
    if problem is not None:
        return NoqaResult(text, 0, skipped, error=problem)
    return NoqaResult(result, added, skipped)
