"""`graphlint server`: a language server (LSP over stdio) that shows graphlint's findings in
the editor, offers their fixes as quick fixes and a rule's page on hover.

Each analysis is a partial run (`project_context.check_in_project`) of the one document,
with the editor's unsaved text in place of the file and the project's other files from the
summary cache, so typing in one file costs about a warm `graphlint check` of it. Changes are
debounced: the analysis starts once typing pauses. Needs the `server` extra (pygls):
`pip install '.[server]'` from a clone, `cuda-graphlint[server]` from the index.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from graphlint import __version__
from graphlint.cache import CACHE_DIR_NAME
from graphlint.config import ConfigError, ConfigResolver
from graphlint.engine import CheckOptions
from graphlint.findings import Finding
from graphlint.fixing.edits import with_edits
from graphlint.project_context import check_in_project
from graphlint.registry import get_rule

DEBOUNCE_SECONDS = 0.3
_CODE_AT = re.compile(r"GL\d{3}")
_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
}

server = LanguageServer("graphlint", __version__)
_pending: dict[str, asyncio.TimerHandle] = {}


def uri_to_path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def _cache_dir(path: Path) -> Path:
    root = server.workspace.root_path if server.workspace else None
    return Path(root or path.parent) / CACHE_DIR_NAME


def analyse(uri: str, text: str) -> list[Finding]:
    """The findings of one document (its unsaved ``text``), checked with its project."""
    path = uri_to_path(uri)
    options = CheckOptions(jobs=1, cache_dir=_cache_dir(path))
    result = check_in_project([str(path)], ConfigResolver(), options, {path.resolve(): text.encode("utf-8")})
    return with_edits(result.findings, result.sources)


def _range(line: int, column: int, end_line: int, end_column: int) -> types.Range:
    return types.Range(
        start=types.Position(line=line - 1, character=column - 1),
        end=types.Position(line=end_line - 1, character=end_column - 1),
    )


def to_diagnostic(finding: Finding, path: str) -> types.Diagnostic:
    """A finding in this document, or one it reaches in another file (shown at the call here)."""
    message = f"[{finding.name}] {finding.message}"
    if finding.path == path:
        where = _range(finding.line, finding.column, finding.end_line, finding.end_column)
        if finding.call_path:
            message += f"\n{finding.call_path_text()}"
    else:
        site = finding.call_path[0]
        where = _range(site.line, 1, site.line + 1, 1)
        message = f"this capture reaches {finding.path}:{finding.line}: {message}"
    return types.Diagnostic(
        range=where,
        message=message,
        severity=_SEVERITY.get(finding.severity, types.DiagnosticSeverity.Warning),
        code=finding.code,
        source="graphlint",
        data=finding.fix.to_dict() if finding.fix is not None and finding.fix.edits and finding.path == path else None,
    )


def publish(ls: LanguageServer, uri: str) -> None:
    document = ls.workspace.get_text_document(uri)
    path = str(uri_to_path(uri))
    try:
        findings = analyse(uri, document.source)
    except ConfigError as error:
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=f"graphlint: {error}"))
        return
    diagnostics = [to_diagnostic(f, path) for f in findings if f.path == path or f.call_path]
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: LanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    publish(ls, params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: LanguageServer, params: types.DidSaveTextDocumentParams) -> None:
    publish(ls, params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: LanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    """Analyse once typing pauses for DEBOUNCE_SECONDS, not on every keystroke."""
    uri = params.text_document.uri
    previous = _pending.pop(uri, None)
    if previous is not None:
        previous.cancel()
    _pending[uri] = asyncio.get_event_loop().call_later(DEBOUNCE_SECONDS, _debounced, ls, uri)


def _debounced(ls: LanguageServer, uri: str) -> None:
    _pending.pop(uri, None)
    publish(ls, uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: LanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
)
def code_action(ls: LanguageServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """A quick fix for each graphlint diagnostic in the request that carries a fix."""
    actions = []
    for diagnostic in params.context.diagnostics:
        if diagnostic.source != "graphlint" or not diagnostic.data:
            continue
        fix = diagnostic.data
        edits = [
            types.TextEdit(range=_range(e["line"], e["column"], e["end_line"], e["end_column"]), new_text=e["content"])
            for e in fix["edits"]
        ]
        unsafe = fix["applicability"] != "safe"
        actions.append(
            types.CodeAction(
                title=f"{diagnostic.code}: {fix['message']}" + (" (unsafe fix)" if unsafe else ""),
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                is_preferred=not unsafe,
                edit=types.WorkspaceEdit(changes={params.text_document.uri: edits}),
            )
        )
    return actions


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(ls: LanguageServer, params: types.HoverParams) -> types.Hover | None:
    """The rule's page when hovering a code (`# noqa: GL101`, a diagnostic's code)."""
    document = ls.workspace.get_text_document(params.text_document.uri)
    line = document.lines[params.position.line] if params.position.line < len(document.lines) else ""
    for match in _CODE_AT.finditer(line):
        if match.start() <= params.position.character <= match.end():
            try:
                page = get_rule(match.group()).doc_page()
            except KeyError:
                return None
            return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=page))
    return None


def main() -> int:
    server.start_io()
    return 0
