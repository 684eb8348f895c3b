"""`graphlint server` over stdio, driven by a real LSP client (pytest-lsp): diagnostics on
open and on change, a quick fix for GL201, the rule's page on hover. The analysis off the event
loop, the lone surrogate, the new code actions and the editor's settings are in
test_language_server_worker.py and test_language_server_actions.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason="the server extra (pygls) is not installed")
pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")

from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient  # noqa: E402

ALIASED = """\
import torch

model = torch.nn.Linear(8, 8).cuda()
static_x = torch.zeros(4, 8, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    static_out = model(static_x)


def collect(loader):
    results = []
    for batch in loader:
        static_x.copy_(batch)
        g.replay()
        results.append(static_out)  # noqa: GL101
    return results
"""


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "graphlint", "server"]),
)
async def client(lsp_client: LanguageClient, tmp_path: Path):
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=tmp_path.as_uri())
    )
    yield
    await lsp_client.shutdown_session()


async def _open(client: LanguageClient, path: Path, text: str) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return uri


@pytest.mark.asyncio
async def test_diagnostics_and_quick_fix_for_gl201(client: LanguageClient, tmp_path: Path) -> None:
    uri = await _open(client, tmp_path / "serve.py", ALIASED)
    by_code = {d.code: d for d in client.diagnostics[uri]}
    gl201 = by_code["GL201"]
    assert gl201.range.start == types.Position(line=14, character=23)
    assert gl201.source == "graphlint" and "static-output-aliased-across-replay" in gl201.message
    assert "GL001" in by_code  # the stale noqa comment for GL101 on that line

    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=gl201.range,
            context=types.CodeActionContext(diagnostics=[gl201]),
        )
    )
    (action,) = [a for a in actions if a.title.startswith("GL201: ") and "suppress" not in a.title]
    assert action.kind == types.CodeActionKind.QuickFix and action.is_preferred
    (edit,) = action.edit.changes[uri]
    assert edit.new_text == ".clone()"
    assert edit.range == types.Range(
        start=types.Position(line=14, character=33), end=types.Position(line=14, character=33)
    )


@pytest.mark.asyncio
async def test_unsaved_change_is_analysed_after_typing_pauses(client: LanguageClient, tmp_path: Path) -> None:
    uri = await _open(client, tmp_path / "serve.py", ALIASED)
    assert "GL201" in {d.code for d in client.diagnostics[uri]}
    fixed = ALIASED.replace("results.append(static_out)  # noqa: GL101", "results.append(static_out.clone())")
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=fixed)],
        )
    )
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    # GL201 and the stale noqa are gone; what is left is the preview GL108, which the server does not run
    assert {d.code for d in client.diagnostics[uri]} == set()
    assert not (tmp_path / "serve.py").exists()  # analysed from the editor's text, not the disk


@pytest.mark.asyncio
async def test_hover_on_a_code_shows_the_rule_page(client: LanguageClient, tmp_path: Path) -> None:
    uri = await _open(client, tmp_path / "serve.py", ALIASED)
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=14, character=45)
        )
    )
    assert hover is not None and hover.contents.value.startswith("# GL101 [host-sync-in-capture]")
