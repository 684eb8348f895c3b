"""pytest plugin: `pytest --graphlint-sanitize[=warn|error]` runs every test under sanitized
replay (GL503 stale output reads, GL506 replays on unchanged inputs), with every callable
given to `make_graphed_callables` put through the two-capture analysis (GL501, GL504, GL505,
GL508) and the parameterized launcher's findings (GL502, GL507) collected. `error` fails the
tests with findings of severity warning or error; GL508 (info) is listed, never fails a test.

Modelled on pytest-memray: a flag and an ini option switch it on, a marker tunes it per test
(`@pytest.mark.graphlint(ignore=["GL506"])`), a hook wrapper around each test call installs
and always uninstalls the guard (no patched torch function outlives a test), failures go
through `pytest_runtest_makereport`, and findings are listed in a terminal summary section.
The `graphlint_findings` fixture gives a test its own findings. With the option off the
plugin adds nothing; without a CUDA device it says once, in the header, that it is inactive.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphlint.findings import Finding
from graphlint.runtime_sanitizer.availability import inactive_reason

_KEY = pytest.StashKey[list]()
_ACTIVE = pytest.StashKey[str]()  # "" when active, else why not


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("graphlint", "CUDA graph sanitizer")
    group.addoption(
        "--graphlint-sanitize",
        nargs="?",
        const="warn",
        default=None,
        choices=("warn", "error"),
        help="run tests under graphlint's CUDA graph sanitizer (warn: report; error: fail tests with findings)",
    )
    group.addoption("--graphlint-report", default=None, metavar="FILE", help="write the sanitizer's findings as JSON")
    parser.addini("graphlint_sanitize_ignore", "codes the sanitizer does not report", type="args", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "graphlint(ignore=[...]): codes the graphlint sanitizer ignores in this test")
    config.stash[_KEY] = []
    if config.getoption("--graphlint-sanitize") is None:
        config.stash[_ACTIVE] = "off"
        return
    config.stash[_ACTIVE] = inactive_reason()


def pytest_report_header(config: pytest.Config) -> str | None:
    state = config.stash.get(_ACTIVE, "off")
    if state == "off":
        return None
    if state:
        return f"graphlint sanitizer: inactive ({state}); tests run unchanged"
    return f"graphlint sanitizer: active, mode {config.getoption('--graphlint-sanitize')}"


def _ignored(item: pytest.Item) -> set[str]:
    codes = set(item.config.getini("graphlint_sanitize_ignore"))
    for marker in item.iter_markers("graphlint"):
        codes |= set(marker.kwargs.get("ignore", ()))
    return codes


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if item.config.stash.get(_ACTIVE, "off") != "":
        yield
        return
    from graphlint.runtime_sanitizer.replay_guard import ReplayGuard

    guard = ReplayGuard()
    guard.findings = item.stash.setdefault(_KEY, [])  # the same list the fixture hands the test
    guard.install()
    try:
        yield
    finally:
        guard.uninstall()
        ignored = _ignored(item)
        guard.findings[:] = [f for f in guard.findings if f.code not in ignored]
        item.config.stash[_KEY].extend((item.nodeid, f) for f in guard.findings)


@pytest.fixture
def graphlint_findings(request: pytest.FixtureRequest) -> list[Finding]:
    """The findings of the running test, filled in as the test runs under the sanitizer."""
    return request.node.stash.setdefault(_KEY, [])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or item.config.getoption("--graphlint-sanitize") != "error":
        return
    findings = [f for f in item.stash.get(_KEY, []) if not f.informational]
    if findings and report.passed:
        report.outcome = "failed"
        report.longrepr = "graphlint sanitizer findings:\n" + "\n".join(
            f"  {f.path}:{f.line}: {f.code} [{f.name}] {f.message}" for f in findings
        )


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    collected = config.stash.get(_KEY, [])
    path = config.getoption("--graphlint-report")
    if path:
        rows = [{**f.to_dict(), "test": nodeid} for nodeid, f in collected]
        Path(path).write_text(json.dumps(rows, indent=2) + "\n")
    if not collected:
        return
    terminalreporter.write_sep("=", "graphlint sanitizer")
    for nodeid, finding in collected:
        terminalreporter.write_line(
            f"{nodeid}: {finding.code} [{finding.name}] {finding.message} ({finding.path}:{finding.line})"
        )
