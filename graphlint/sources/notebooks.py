"""Jupyter notebooks (`.ipynb`): their code cells as one Python module, and edits back into cells.

A notebook runs its cells in one namespace, so a capture in one cell and a hazard in a function
defined in another connect only when the cells are analysed together: the code cells are joined,
in order, into one module (as ruff does), and every finding is located in that module. Only when
a finding is shown is its line mapped back to the cell it is in (`locate_in_cells`), so
suppressions, the cache, baselines and fixes work on the joined module exactly as on a file.

IPython's own syntax (`%magic`, `%%cell magic`, `!shell`, `obj?`) is not Python: each such line
is masked as `pass` at its indentation, so the module parses and keeps its line numbers; a cell
run by a non-Python cell magic (`%%bash`) is masked whole. A notebook whose kernel is not Python
contributes no code. Writing back (`Notebook.rewritten`) replaces only the sources of the cells a
fix changed, restores the masked lines, and re-serialises the JSON in the layout it was read in;
a notebook whose layout cannot be reproduced byte for byte is refused, never reformatted.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphlint.findings import CallSite, Edit, Finding

SUFFIX = ".ipynb"

# Cell magics whose body is Python that IPython runs as such; any other cell magic's body is not.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3", "pypy"})
# `x = !ls`, `files = %sx ls`: a magic's result assigned to names.
_ASSIGNED_MAGIC = re.compile(r"^\s*[\w.,\s()\[\]]+=\s*[%!]")
# The JSON layouts notebook writers use: (indent, ensure_ascii, separators).
_LAYOUTS: tuple[tuple[int | None, bool, tuple[str, str] | None], ...] = tuple(
    (indent, ascii_only, separators)
    for indent in (1, 2, 4, None)
    for ascii_only in (False, True)
    for separators in ((None,) if indent is not None else (None, (",", ":")))
)


class NotebookError(ValueError):
    """The file is not a notebook graphlint can read, or an edit cannot go back into its cells."""


def is_notebook(path: Path | str) -> bool:
    return str(path).endswith(SUFFIX)


@dataclass(frozen=True)
class Notebook:
    """A notebook's bytes, its code cells joined into ``python``, and where each line came from."""

    raw: bytes
    document: dict[str, Any]
    python: str
    owners: tuple[tuple[int, int], ...]  # per line of ``python``: (cell index, 0-based line in the cell)
    originals: tuple[str, ...]  # per line of ``python``: the cell's own text (magics unmasked)

    def cell_line(self, line: int) -> tuple[int | None, int]:
        """The 1-based cell number (every cell counted, markdown too) and line in it of the
        joined module's ``line``; a line past the end belongs to the last code cell."""
        if not self.owners:
            return None, line
        if line > len(self.owners):
            cell, last = self.owners[-1]
            return cell + 1, last + 1 + line - len(self.owners)
        cell, offset = self.owners[max(line, 1) - 1]
        return cell + 1, offset + 1

    def rewritten(self, fixed: str) -> bytes:
        """The notebook's bytes with ``fixed`` (an edit of ``python``) put back into its cells:
        only the changed cells' sources differ, in the JSON layout the notebook was read in."""
        layout = _layout(self.document, self.raw)
        if layout is None:
            raise NotebookError("its JSON layout is not one graphlint can reproduce exactly (save it with Jupyter)")
        document = json.loads(self.raw.decode("utf-8"))
        for index, text in _cell_texts(self, fixed).items():
            cell = document["cells"][index]
            old = _source(cell)
            if old and not old.endswith("\n") and text.endswith("\n"):
                text = text[:-1]  # Jupyter keeps no newline after a cell's last line
            if text != old:
                cell["source"] = _split(text) if isinstance(cell["source"], list) else text
        data = _dump(document, layout, self.raw.endswith(b"\n"))
        if read_notebook(data).python != fixed:
            raise NotebookError("the edit does not map back onto the notebook's cells")
        return data

    def edited(self, fixed: str) -> tuple[bytes | None, str | None]:
        """`rewritten`, or why it cannot be: for a caller that reports and goes on."""
        try:
            return self.rewritten(fixed), None
        except NotebookError as error:
            return None, str(error)

    def cell_diff(self, display: str, fixed: str) -> str:
        """A unified diff per changed cell, headed `a/PATH:cell N`, of ``fixed`` put back."""
        new = read_notebook(self.rewritten(fixed)).document["cells"]
        chunks = []
        for index, cell in enumerate(self.document["cells"]):
            before, after = _source(cell), _source(new[index])
            if before != after:
                where = f"{display}:cell {index + 1}"
                lines = difflib.unified_diff(_lines(before), _lines(after), fromfile=f"a/{where}", tofile=f"b/{where}")
                chunks.append("".join(lines))
        return "".join(chunks)


def _split(text: str) -> list[str]:
    """``text``'s lines, each with its newline: split at `\n` only, as Python counts lines
    (`str.splitlines` also splits at form feeds and other separators, which would shift them)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _lines(text: str) -> list[str]:
    """``text``'s lines, the last one given the newline a cell leaves off."""
    return [line if line.endswith("\n") else line + "\n" for line in _split(text)]


def read_notebook(data: bytes) -> Notebook:
    """The notebook in ``data``; `NotebookError` saying why when it is not nbformat 4 JSON."""
    try:
        document = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        raise NotebookError(f"not a notebook: not valid UTF-8 at byte {error.start}") from None
    except (ValueError, RecursionError) as error:
        raise NotebookError(f"not a notebook: invalid JSON ({str(error).splitlines()[0]})") from None
    _validate(document)
    python_lines: list[str] = []
    owners: list[tuple[int, int]] = []
    originals: list[str] = []
    if _is_python(document.get("metadata")):
        for index, cell in enumerate(document["cells"]):
            if cell["cell_type"] != "code":
                continue
            lines = _lines(_source(cell))
            python_lines.extend(_masked(lines))
            owners.extend((index, number) for number in range(len(lines)))
            originals.extend(lines)
    return Notebook(data, document, "".join(python_lines), tuple(owners), tuple(originals))


def _validate(document: object) -> None:
    if not isinstance(document, dict):
        raise NotebookError("not a notebook: the JSON is not an object")
    if document.get("nbformat") != 4:
        raise NotebookError(f"not an nbformat 4 notebook (nbformat: {document.get('nbformat')!r})")
    cells = document.get("cells")
    if not isinstance(cells, list):
        raise NotebookError("not a notebook: no `cells` list")
    for number, cell in enumerate(cells, start=1):
        source = cell.get("source") if isinstance(cell, dict) else None
        valid_source = isinstance(source, str) or (
            isinstance(source, list) and all(isinstance(part, str) for part in source)
        )
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str) or not valid_source:
            raise NotebookError(f"not a notebook: cell {number} has no `cell_type` or no text `source`")


def _is_python(metadata: object) -> bool:
    """Whether the kernel runs Python: `language_info.name`, else `kernelspec.language`; a
    notebook that names neither is taken to be Python (as Jupyter's default kernel is)."""
    if not isinstance(metadata, dict):
        return True
    for key, field in (("language_info", "name"), ("kernelspec", "language")):
        table = metadata.get(key)
        if isinstance(table, dict) and isinstance(table.get(field), str):
            return table[field].lower() in ("python", "python3", "ipython")
    return True


def _source(cell: dict[str, Any]) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def _masked(lines: list[str]) -> list[str]:
    """``lines`` of one code cell with IPython's syntax replaced by `pass` at the same indentation."""
    first = next((line.strip() for line in lines if line.strip()), "")
    if first.startswith("%%"):
        magic = first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""
        if magic not in _PYTHON_CELL_MAGICS:
            return ["\n" for _ in lines]  # `%%bash`, `%%writefile`: the body is not Python
    masked = []
    state = _Open()
    for line in lines:
        if state.closed and _is_ipython_line(line.strip()):
            masked.append(line[: len(line) - len(line.lstrip())] + "pass\n")
        else:
            masked.append(line)
        state = state.after(line)
    return masked


def _is_ipython_line(stripped: str) -> bool:
    if stripped.startswith(("%", "!")) or _ASSIGNED_MAGIC.match(stripped):
        return True
    return "#" not in stripped and (stripped.startswith("?") or stripped.endswith("?"))


@dataclass(frozen=True)
class _Open:
    """What is open at the end of a line: brackets, a triple-quoted string, a backslash. Only a
    line that starts with nothing open can be a magic: `% x)` continuing an expression is not.
    A light scan (strings and comments skipped, no tokenizer: magics do not tokenize)."""

    depth: int = 0
    quote: str = ""  # the triple quote a string spanning lines is waiting for
    backslash: bool = False

    @property
    def closed(self) -> bool:
        return self.depth <= 0 and not self.quote and not self.backslash

    def after(self, line: str) -> _Open:
        depth, quote, index = self.depth, self.quote, 0
        while index < len(line):
            char = line[index]
            if quote:
                if char == "\\":
                    index += 1
                elif line.startswith(quote, index):
                    index += len(quote) - 1
                    quote = ""
            elif char == "#":
                break
            elif char in "'\"":
                quote = line[index : index + 3] if line.startswith(char * 3, index) else char
                index += len(quote) - 1
            elif char in "([{":
                depth += 1
            elif char in ")]}":
                depth -= 1
            index += 1
        body = line.rstrip("\r\n")
        return _Open(depth, quote if len(quote) == 3 else "", body.endswith("\\"))


def _cell_texts(notebook: Notebook, fixed: str) -> dict[int, str]:
    """Each code cell's new text: unchanged lines keep the cell's own text (magics restored),
    changed lines go to the cell of the lines they replace, inserted ones to the cell above."""
    old = _split(notebook.python)
    new = _split(fixed)
    texts: dict[int, list[str]] = {cell: [] for cell, _ in notebook.owners}
    masked = {i for i, line in enumerate(old) if line != notebook.originals[i]}
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for i in range(i1, i2):
                texts[notebook.owners[i][0]].append(notebook.originals[i])
            continue
        cells = {notebook.owners[i][0] for i in range(i1, i2)}
        if len(cells) > 1 or masked.intersection(range(i1, i2)):
            raise NotebookError("a fix spans two cells or changes an IPython magic line")
        owner = cells.pop() if cells else notebook.owners[max(i1 - 1, 0)][0]
        texts[owner].extend(new[j1:j2])
    return {cell: "".join(lines) for cell, lines in texts.items()}


def _layout(document: dict[str, Any], raw: bytes) -> tuple[int | None, bool, tuple[str, str] | None] | None:
    """How the notebook's JSON was written, found by writing it back each way; None if no way matches."""
    newline = raw.endswith(b"\n")
    return next((layout for layout in _LAYOUTS if _dump(document, layout, newline) == raw), None)


def _dump(document: dict[str, Any], layout: tuple[int | None, bool, tuple[str, str] | None], newline: bool) -> bytes:
    indent, ascii_only, separators = layout
    text = json.dumps(document, indent=indent, ensure_ascii=ascii_only, separators=separators)
    return (text + ("\n" if newline else "")).encode("utf-8")


def locate_in_cells(findings: list[Finding], notebooks: Mapping[str, Notebook]) -> list[Finding]:
    """The findings as shown: a finding (or call-path step) in a notebook moved to its cell and
    the line in that cell; fix edits are given in the finding's cell."""
    if not notebooks:
        return findings
    return [_located(finding, notebooks) for finding in findings]


def _located(finding: Finding, notebooks: Mapping[str, Notebook]) -> Finding:
    call_path = tuple(_located_site(site, notebooks) for site in finding.call_path)
    notebook = notebooks.get(finding.path)
    if notebook is None:
        return dataclasses.replace(finding, call_path=call_path) if call_path != finding.call_path else finding
    cell, line = notebook.cell_line(finding.line)
    end_cell, end_line = notebook.cell_line(finding.end_line)
    end = (end_line, finding.end_column) if end_cell == cell else (line, finding.column)
    fix = finding.fix
    if fix is not None and fix.edits:
        fix = dataclasses.replace(fix, edits=tuple(_located_edit(edit, notebook) for edit in fix.edits))
    return dataclasses.replace(
        finding, line=line, end_line=end[0], end_column=end[1], fix=fix, call_path=call_path, cell=cell
    )


def _located_edit(edit: Edit, notebook: Notebook) -> Edit:
    return dataclasses.replace(
        edit, line=notebook.cell_line(edit.line)[1], end_line=notebook.cell_line(edit.end_line)[1]
    )


def _located_site(site: CallSite, notebooks: Mapping[str, Notebook]) -> CallSite:
    notebook = notebooks.get(site.path)
    if notebook is None:
        return site
    cell, line = notebook.cell_line(site.line)
    return dataclasses.replace(site, line=line, cell=cell)
