"""`graphlint server` analyses off its event loop (issue #36): a request is answered while an
analysis runs, an edit cancels the analysis of the text it replaced, and a lone surrogate in
the editor's text gets GL000 without stopping later diagnostics.

The worker is held busy through its test seam, `GRAPHLINT_SERVER_ANALYSIS_DELAY` (it spins on
the CPU that long before each analysis); the tests assert the order of events, not times.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason="the server extra (pygls) is not installed")
pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")

from lsp_session import change_document, next_diagnostics, open_document, server_config  # noqa: E402
from lsprotocol import types  # noqa: E402
from pytest_lsp import LanguageClient  # noqa: E402
from test_language_server import ALIASED  # noqa: E402

FIXED = ALIASED.replace("results.append(static_out)  # noqa: GL101", "results.append(static_out.clone())")
DELAY = "4"


@pytest_lsp.fixture(config=server_config({**os.environ, "GRAPHLINT_SERVER_ANALYSIS_DELAY": DELAY}))
async def slow_client(lsp_client: LanguageClient, tmp_path: Path):
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=tmp_path.as_uri())
    )
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=server_config())
async def client(lsp_client: LanguageClient, tmp_path: Path):
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=tmp_path.as_uri())
    )
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_hover_is_answered_while_the_analysis_runs(slow_client: LanguageClient, tmp_path: Path) -> None:
    uri = open_document(slow_client, tmp_path / "serve.py", ALIASED)
    hover = await slow_client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=14, character=45)
        )
    )
    assert hover is not None and hover.contents.value.startswith("# GL101")
    assert uri not in slow_client.diagnostics  # answered before the analysis of the open finished
    published = await next_diagnostics(slow_client, uri)
    assert "GL201" in {d.code for d in published.diagnostics}


@pytest.mark.asyncio
async def test_an_edit_cancels_the_analysis_of_the_text_it_replaced(
    slow_client: LanguageClient, tmp_path: Path
) -> None:
    uri = open_document(slow_client, tmp_path / "serve.py", ALIASED)
    change_document(slow_client, uri, 2, FIXED)
    published = await next_diagnostics(slow_client, uri)
    assert published.version == 2 and not published.diagnostics  # version 1's were never published
    cancelled = [m.message for m in slow_client.log_messages if "cancelled the analysis" in m.message]
    assert cancelled == [f"graphlint: cancelled the analysis of {uri} (version 1): superseded"]


@pytest.mark.asyncio
async def test_a_lone_surrogate_gets_gl000_and_later_edits_are_analysed(client: LanguageClient, tmp_path: Path) -> None:
    uri = open_document(client, tmp_path / "serve.py", 'import torch\nname = "caf\ud800"\n')
    (problem,) = (await next_diagnostics(client, uri)).diagnostics
    assert problem.code == "GL000" and "lone surrogate (U+D800)" in problem.message
    assert problem.range.start == types.Position(line=1, character=11)

    change_document(client, uri, 2, ALIASED.replace("results = []", 'results = ["\udc00"]'))
    assert [d.code for d in (await next_diagnostics(client, uri)).diagnostics] == ["GL000"]
    change_document(client, uri, 3, ALIASED)
    published = await next_diagnostics(client, uri)
    assert published.version == 3 and "GL201" in {d.code for d in published.diagnostics}


@pytest.mark.asyncio
async def test_code_actions_answer_during_an_analysis_and_never_from_stale_text(
    slow_client: LanguageClient, tmp_path: Path
) -> None:
    uri = open_document(slow_client, tmp_path / "serve.py", ALIASED)
    gl201 = next(d for d in (await next_diagnostics(slow_client, uri)).diagnostics if d.code == "GL201")
    context = types.CodeActionContext(diagnostics=[gl201])
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=gl201.range, context=context
    )
    titles = {action.title for action in await slow_client.text_document_code_action_async(params)}
    assert {"GL201: suppress on this line (# noqa: GL201)", "graphlint: apply all safe fixes"} <= titles

    change_document(slow_client, uri, 2, "\n" + ALIASED)  # every line moves down: the old edits are wrong now
    analysed = asyncio.ensure_future(next_diagnostics(slow_client, uri))
    during = await slow_client.text_document_code_action_async(params)
    assert not analysed.done()  # answered while version 2 is analysed
    assert during and all(a.kind == types.CodeActionKind.QuickFix and "suppress" not in a.title for a in during)
    assert (await analysed).version == 2
