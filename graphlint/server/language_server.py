"""`graphlint server`: a language server (LSP over stdio) that shows graphlint's findings in
the editor, offers their fixes, a suppression and fix-all as code actions, and a rule's page on
hover.

Each analysis is a partial run (`project_context.check_in_project`) of the one document,
with the editor's unsaved text in place of the file and the project's other files from the
summary cache, so typing in one file costs about a warm `graphlint check` of it. Analyses run
in a worker process (`server_worker`), never on the event loop: requests are answered at once
from the latest results, diagnostics are published when an analysis finishes, and an edit
cancels the analysis of the text it replaced. Changes are debounced: the analysis starts once
typing pauses. The editor's settings (`server_settings`) may turn on preview and follow-values.
Needs the `server` extra (pygls): `pip install '.[server]'` from a clone,
`cuda-graphlint[server]` from the index.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from graphlint import __version__
from graphlint.caching.store import CACHE_DIR_NAME
from graphlint.core_rules import INTERNAL_ERROR, PARSE_ERROR, UNUSED_SUPPRESSION
from graphlint.findings import Finding
from graphlint.registry import get_rule
from graphlint.server.actions import (
    fix_all,
    position_range,
    quick_fix,
    suppress_title,
    suppression,
    utf16_length,
    wanted,
)
from graphlint.server.settings import EditorSettings, updated
from graphlint.server.worker import AnalysisQueue, AnalysisRequest, AnalysisResult

DEBOUNCE_SECONDS = 0.3
_CODE_AT = re.compile(r"GL\d{3}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a valid pair arrives from JSON as one character
_NEVER_SUPPRESSED = {PARSE_ERROR.code, UNUSED_SUPPRESSION.code, INTERNAL_ERROR.code}
_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
}


class _State:
    """What the server holds between messages: the documents open, the latest analysis of each,
    the editor's settings and the queue of analyses."""

    def __init__(self) -> None:
        self.open: set[str] = set()
        self.latest: dict[str, AnalysisResult] = {}
        self.settings = EditorSettings()
        self.pending: dict[str, asyncio.TimerHandle] = {}
        self.queue: AnalysisQueue | None = None


server = LanguageServer("graphlint", __version__)
_state = _State()


def uri_to_path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def _cache_dir(path: Path) -> Path:
    root = server.workspace.root_path if server.workspace else None
    return Path(root or path.parent) / CACHE_DIR_NAME


def _request(uri: str) -> AnalysisRequest | None:
    """What an analysis of ``uri`` is made of now; None once the document is closed."""
    if uri not in _state.open:
        return None
    document = server.workspace.get_text_document(uri)
    path = uri_to_path(uri)
    return AnalysisRequest(
        uri=uri,
        path=str(path),
        version=document.version,
        text=document.source,
        cache_dir=str(_cache_dir(path)),
        preview=_state.settings.preview,
        follow_values=_state.settings.follow_values,
    )


def to_diagnostic(finding: Finding, path: str) -> types.Diagnostic:
    """A finding in this document, or one it reaches in another file (shown at the call here)."""
    message = f"[{finding.name}] {finding.message}"
    if finding.path == path:
        where = position_range(finding.line, finding.column, finding.end_line, finding.end_column)
        if finding.call_path:
            message += f"\n{finding.call_path_text()}"
    else:
        site = finding.call_path[0]
        where = position_range(site.line, 1, site.line + 1, 1)
        message = f"this capture reaches {finding.path}:{finding.line}: {message}"
    own_fix = finding.fix is not None and finding.fix.edits and finding.path == path
    return types.Diagnostic(
        range=where,
        message=message,
        severity=_SEVERITY.get(finding.severity, types.DiagnosticSeverity.Warning),
        code=finding.code,
        source="graphlint",
        data={"fix": finding.fix.to_dict()} if own_fix and finding.fix is not None else None,
    )


def _publish(uri: str, version: int | None, diagnostics: list[types.Diagnostic]) -> None:
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
    )


def _finished(result: AnalysisResult) -> None:
    """An analysis that still stands for its document: publish it and keep it for requests."""
    uri = result.request.uri
    if result.error is not None:
        server.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=result.error))
        return
    _state.latest[uri] = result
    path = result.request.path
    diagnostics = [to_diagnostic(f, path) for f in result.findings if f.path == path or f.call_path]
    _publish(uri, result.request.version, diagnostics)


def _log(message: str) -> None:
    server.window_log_message(types.LogMessageParams(type=types.MessageType.Log, message=message))


def _queue() -> AnalysisQueue:
    if _state.queue is None:
        _state.queue = AnalysisQueue(_request, _finished, _log)
    return _state.queue


def _unreadable(text: str) -> types.Diagnostic | None:
    """GL000 at the first lone surrogate: such text is not Unicode, so it cannot be analysed
    (nor saved as UTF-8); the next edit that removes it is analysed as usual."""
    match = _LONE_SURROGATE.search(text)
    if match is None:
        return None
    line = text.count("\n", 0, match.start())
    start = text.rfind("\n", 0, match.start()) + 1
    character = utf16_length(text[start : match.start()])
    return types.Diagnostic(
        range=types.Range(
            start=types.Position(line=line, character=character),
            end=types.Position(line=line, character=character + 1),
        ),
        message=(
            f"[{PARSE_ERROR.name}] the editor's text holds a lone surrogate (U+{ord(match.group()):04X}), "
            "which is not Unicode: it cannot be analysed until it is removed"
        ),
        severity=types.DiagnosticSeverity.Error,
        code=PARSE_ERROR.code,
        source="graphlint",
    )


def analyse_later(uri: str) -> None:
    """Queue an analysis of ``uri`` as it is now; text that is not Unicode gets GL000 instead."""
    document = server.workspace.get_text_document(uri)
    problem = _unreadable(document.source)
    if problem is None:
        _queue().request(uri)
        return
    _queue().forget(uri)
    _state.latest.pop(uri, None)
    _publish(uri, document.version, [problem])


@server.feature(types.INITIALIZE)
def initialize(ls: LanguageServer, params: types.InitializeParams) -> None:
    _apply_settings(params.initialization_options)


@server.feature(types.INITIALIZED)
def initialized(ls: LanguageServer, params: types.InitializedParams) -> None:
    _queue().warm()


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: LanguageServer, params: types.DidChangeConfigurationParams) -> None:
    """New settings: every open document is analysed again under them."""
    if _apply_settings(params.settings):
        for uri in sorted(_state.open):
            analyse_later(uri)


def _apply_settings(raw: Any) -> bool:
    """Take the editor's settings; whether they changed."""
    settings, problems = updated(_state.settings, raw)
    for problem in problems:
        server.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=problem))
    changed = settings != _state.settings
    _state.settings = settings
    return changed


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: LanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    _state.open.add(params.text_document.uri)
    analyse_later(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: LanguageServer, params: types.DidSaveTextDocumentParams) -> None:
    if params.text_document.uri in _state.open:
        analyse_later(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: LanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    """Cancel the analysis of the replaced text now; analyse once typing pauses for
    DEBOUNCE_SECONDS, not on every keystroke."""
    uri = params.text_document.uri
    _queue().supersede(uri)
    previous = _state.pending.pop(uri, None)
    if previous is not None:
        previous.cancel()
    _state.pending[uri] = asyncio.get_running_loop().call_later(DEBOUNCE_SECONDS, _debounced, uri)


def _debounced(uri: str) -> None:
    _state.pending.pop(uri, None)
    if uri in _state.open:
        analyse_later(uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: LanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    _state.open.discard(uri)
    _state.latest.pop(uri, None)
    pending = _state.pending.pop(uri, None)
    if pending is not None:
        pending.cancel()
    _queue().forget(uri)
    _publish(uri, None, [])


@server.feature(types.SHUTDOWN)
def shutdown(ls: LanguageServer, params: None) -> None:
    if _state.queue is not None:
        _state.queue.close()


def _current(uri: str) -> AnalysisResult | None:
    """The latest analysis of ``uri`` if it read the text the editor holds now."""
    result = _state.latest.get(uri)
    request = _request(uri)
    if result is None or request is None or result.request.text != request.text:
        return None
    return result


def _finding_of(result: AnalysisResult, diagnostic: types.Diagnostic) -> Finding | None:
    """The finding in this document that ``diagnostic`` shows (only these can be suppressed here)."""
    for finding in result.findings:
        if (
            finding.path == result.request.path
            and finding.code == diagnostic.code
            and finding.line - 1 == diagnostic.range.start.line
            and finding.code not in _NEVER_SUPPRESSED
        ):
            return finding
    return None


def _resolves_edits(ls: LanguageServer) -> bool:
    capabilities = ls.client_capabilities.text_document
    code_action = capabilities.code_action if capabilities else None
    support = code_action.resolve_support if code_action else None
    return support is not None and "edit" in support.properties


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll], resolve_provider=True
    ),
)
def code_action(ls: LanguageServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """For each graphlint diagnostic asked about, its fix and a suppression on its line; and
    `source.fixAll` when the safe fixes change the document. Answered from the latest results:
    a suppression's edit, which parses the file, is computed on `codeAction/resolve` when the
    client can resolve one."""
    uri = params.text_document.uri
    result = _current(uri)
    actions: list[types.CodeAction] = []
    if wanted(types.CodeActionKind.QuickFix, params.context.only):
        for diagnostic in params.context.diagnostics:
            fix = quick_fix(uri, diagnostic)
            actions.extend([fix] if fix is not None else [])
            suppress = _suppress_action(ls, uri, result, diagnostic)
            actions.extend([suppress] if suppress is not None else [])
    if (
        result is not None
        and result.fixed_text is not None
        and wanted(types.CodeActionKind.SourceFixAll, params.context.only)
    ):
        actions.append(fix_all(uri, result.request.text, result.fixed_text))
    return actions


def _suppress_action(
    ls: LanguageServer, uri: str, result: AnalysisResult | None, diagnostic: types.Diagnostic
) -> types.CodeAction | None:
    finding = _finding_of(result, diagnostic) if result is not None and diagnostic.source == "graphlint" else None
    if result is None or finding is None:
        return None
    action = types.CodeAction(
        title=suppress_title(finding.code), kind=types.CodeActionKind.QuickFix, diagnostics=[diagnostic]
    )
    if _resolves_edits(ls):
        action.data = {"uri": uri, "text_version": result.request.version}
        return action
    action.edit = suppression(uri, result.request.text, finding)
    return action if action.edit is not None else None


@server.feature(types.CODE_ACTION_RESOLVE)
def resolve_code_action(ls: LanguageServer, action: types.CodeAction) -> types.CodeAction:
    """A suppression's edit, against the text the latest analysis read (none if it changed)."""
    data = action.data if isinstance(action.data, dict) else {}
    result = _current(data.get("uri", ""))
    if result is None or result.request.version != data.get("text_version") or not action.diagnostics:
        return action
    finding = _finding_of(result, action.diagnostics[0])
    if finding is not None:
        action.edit = suppression(result.request.uri, result.request.text, finding)
    return action


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
