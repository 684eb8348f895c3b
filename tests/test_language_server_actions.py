"""`graphlint server`'s code actions and settings (issue #35), driven by pytest-lsp: "suppress on
this line" writes what `--add-noqa` writes, `source.fixAll` makes what `--fix` makes, and the
editor's `preview` and `followValues` change the diagnostics published."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason="the server extra (pygls) is not installed")
pytest_lsp = pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed")

from lsp_session import apply_edit, change_document, next_diagnostics, open_document, server_config  # noqa: E402
from lsprotocol import types  # noqa: E402
from pytest_lsp import LanguageClient  # noqa: E402
from test_follow_values import HELD  # noqa: E402
from test_language_server import ALIASED  # noqa: E402

from conftest import run_cli  # noqa: E402

FIXED = ALIASED.replace("results.append(static_out)  # noqa: GL101", "results.append(static_out.clone())")


async def _start(client: LanguageClient, root: Path, options: object = None, resolve: bool = False) -> None:
    code_action = types.CodeActionClientCapabilities(
        resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"]) if resolve else None
    )
    await client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(
                text_document=types.TextDocumentClientCapabilities(code_action=code_action)
            ),
            root_uri=root.as_uri(),
            initialization_options=options,
        )
    )


@pytest_lsp.fixture(config=server_config())
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def _actions(
    client: LanguageClient, uri: str, diagnostics: list[types.Diagnostic], only: list[str] | None = None
) -> list[types.CodeAction]:
    whole = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0))
    return await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=diagnostics[0].range if diagnostics else whole,
            context=types.CodeActionContext(diagnostics=diagnostics, only=only),
        )
    )


def _cli(tmp_path: Path, text: str, *flags: str) -> tuple[str, str]:
    """`graphlint check` with ``flags`` on ``text`` written to disk: its output and the file after."""
    folder = tmp_path / "cli"
    folder.mkdir()
    (folder / "serve.py").write_text(text)
    result = run_cli("check", "--no-cache", "--exit-zero", *flags, "serve.py", cwd=folder)
    assert result.returncode == 0, result.stderr
    return result.stdout, (folder / "serve.py").read_text()


def _cli_result(tmp_path: Path, text: str, *flags: str) -> str:
    return _cli(tmp_path, text, *flags)[1]


def _cli_codes(tmp_path: Path, text: str, *flags: str) -> set[str]:
    return {finding["code"] for finding in json.loads(_cli(tmp_path, text, "--format", "json", *flags)[0])}


@pytest.mark.asyncio
@pytest.mark.parametrize("resolve", [False, True], ids=["edit-in-the-action", "edit-on-resolve"])
async def test_suppress_on_this_line_writes_what_add_noqa_writes(
    client: LanguageClient, tmp_path: Path, resolve: bool
) -> None:
    await _start(client, tmp_path, resolve=resolve)
    uri = open_document(client, tmp_path / "serve.py", FIXED.replace(".clone()", ""))
    gl201 = next(d for d in (await next_diagnostics(client, uri)).diagnostics if d.code == "GL201")
    (action,) = [a for a in await _actions(client, uri, [gl201]) if "suppress" in a.title]
    assert action.kind == types.CodeActionKind.QuickFix and (action.edit is None) == resolve
    if resolve:
        action = await client.code_action_resolve_async(action)
    suppressed = apply_edit(FIXED.replace(".clone()", ""), uri, action.edit)
    assert suppressed == _cli_result(tmp_path, FIXED.replace(".clone()", ""), "--add-noqa")
    assert "results.append(static_out)  # noqa: GL201\n" in suppressed


@pytest.mark.asyncio
async def test_suppression_merges_into_the_lines_noqa(client: LanguageClient, tmp_path: Path) -> None:
    await _start(client, tmp_path)
    uri = open_document(client, tmp_path / "serve.py", ALIASED)
    diagnostics = (await next_diagnostics(client, uri)).diagnostics
    gl201 = next(d for d in diagnostics if d.code == "GL201")
    (action,) = [a for a in await _actions(client, uri, [gl201]) if "suppress" in a.title]
    assert "results.append(static_out)  # noqa: GL101, GL201\n" in apply_edit(ALIASED, uri, action.edit)
    gl001 = next(d for d in diagnostics if d.code == "GL001")  # a stale suppression is never suppressed
    assert not [a for a in await _actions(client, uri, [gl001]) if "suppress" in a.title]


@pytest.mark.asyncio
async def test_fix_all_makes_what_fix_makes(client: LanguageClient, tmp_path: Path) -> None:
    await _start(client, tmp_path)
    uri = open_document(client, tmp_path / "serve.py", ALIASED)
    await next_diagnostics(client, uri)
    (action,) = await _actions(client, uri, [], only=[types.CodeActionKind.SourceFixAll])
    assert action.kind == types.CodeActionKind.SourceFixAll
    fixed = apply_edit(ALIASED, uri, action.edit)
    assert fixed != ALIASED and fixed == _cli_result(tmp_path, ALIASED, "--fix")

    change_document(client, uri, 2, fixed)  # nothing left to fix: no fix-all offered
    await next_diagnostics(client, uri)
    assert not await _actions(client, uri, [], only=[types.CodeActionKind.SourceFixAll])


def _codes(published: types.PublishDiagnosticsParams) -> set[str]:
    return {str(d.code) for d in published.diagnostics}


@pytest.mark.asyncio
async def test_preview_from_initialization_options_and_configuration(client: LanguageClient, tmp_path: Path) -> None:
    await _start(client, tmp_path, options={"preview": True})
    uri = open_document(client, tmp_path / "serve.py", FIXED)
    preview_codes = _codes(await next_diagnostics(client, uri))
    assert preview_codes and preview_codes == _cli_codes(tmp_path, FIXED, "--preview")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"graphlint": {"preview": False}})
    )
    assert _codes(await next_diagnostics(client, uri)) == set()


@pytest.mark.asyncio
async def test_follow_values_from_configuration_and_a_bad_value_is_reported(
    client: LanguageClient, tmp_path: Path
) -> None:
    await _start(client, tmp_path)
    uri = open_document(client, tmp_path / "serve.py", HELD)
    assert _codes(await next_diagnostics(client, uri)) == set()
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"followValues": True}))
    assert _codes(await next_diagnostics(client, uri)) == {"GL101"}

    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"followValues": "yes"}))
    change_document(client, uri, 2, HELD + "\n")  # the bad value kept nothing from changing
    assert _codes(await next_diagnostics(client, uri)) == {"GL101"}
    assert any("'followValues' must be true, false or null" in m.message for m in client.messages)


def test_settings_of_any_shape_are_reported_not_fatal() -> None:
    from graphlint.server.settings import EditorSettings, updated

    kept = EditorSettings(preview=True)
    for raw in (["preview"], "preview", 3, {"graphlint": None}, {"graphlint": [True]}):
        settings, problems = updated(kept, raw)
        assert settings == kept and problems and "settings must be an object" in problems[0]
    assert updated(kept, {"ruff": {"lineLength": 100}, "preview": None}) == (EditorSettings(), [])
    assert updated(kept, None) == (kept, [])
