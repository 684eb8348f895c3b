"""Helpers for driving `graphlint server` with pytest-lsp: open or change a document and wait
for its diagnostics, apply a workspace edit to a text as an editor would."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

SERVER_COMMAND = [sys.executable, "-m", "graphlint", "server"]


def server_config(env: dict[str, str] | None = None) -> ClientServerConfig:
    return ClientServerConfig(server_command=SERVER_COMMAND, server_env=env)


def open_document(client: LanguageClient, path: Path, text: str) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )
    return uri


def change_document(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def next_diagnostics(client: LanguageClient, uri: str) -> types.PublishDiagnosticsParams:
    """The next diagnostics published for ``uri`` (others' are skipped); a server that never
    publishes fails the test after a generous minute instead of hanging it."""

    async def wait() -> types.PublishDiagnosticsParams:
        while True:
            published = await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            if published.uri == uri:
                return published

    return await asyncio.wait_for(wait(), timeout=60)


def _offset(text: str, position: types.Position) -> int:
    lines = text.splitlines(keepends=True)
    return sum(len(line) for line in lines[: position.line]) + position.character  # ASCII texts only


def apply_edit(text: str, uri: str, edit: types.WorkspaceEdit) -> str:
    """``text`` with the edit's changes to ``uri`` applied (from the last, so offsets hold)."""
    changes = sorted(edit.changes[uri], key=lambda e: (e.range.start.line, e.range.start.character), reverse=True)
    for change in changes:
        start, end = _offset(text, change.range.start), _offset(text, change.range.end)
        text = text[:start] + change.new_text + text[end:]
    return text
