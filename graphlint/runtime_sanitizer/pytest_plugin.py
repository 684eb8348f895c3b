"""pytest plugin: `pytest --graphlint-sanitize[=warn|error]` runs every test under sanitized
replay (GL503 stale output reads, GL506 replays on unchanged inputs), with every callable
given to `make_graphed_callables` put through the two-capture analysis (GL501, GL504, GL505,
GL508) and the parameterized launcher's findings (GL502, GL507) collected. `error` fails the
tests with findings of severity warning or error; GL508 (info) is listed, never fails a test.

Modelled on pytest-memray: a flag and an ini option switch it on, a marker tunes it per test
(`@pytest.mark.graphlint(ignore=["GL506"])`), a hook wrapper around each test call installs
and always uninstalls the guard (no patched torch function outlives a test), failures go
through `pytest_runtest_makereport`, and findings are listed in a terminal summary section.
The `graphlint_findings` fixture gives a test its own findings, placed at user lines, merged
and suppressible (`postprocess`). With the option off the plugin adds nothing. An inactive
sanitizer (no CUDA device, untested versions) says so in the header and as a GL500 finding
in the summary and the JSON report; `=error` then fails the session unless
`--graphlint-sanitize-allow-inactive` is given. The summary ends with the graphs seen,
analysed and refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from graphlint.findings import Finding
from graphlint.runtime_sanitizer.analysis.graph_counts import GraphCounts
from graphlint.runtime_sanitizer.analysis.postprocess import finish
from graphlint.runtime_sanitizer.analysis.report import state_findings
from graphlint.runtime_sanitizer.availability import Availability, availability

RUN_LOCATION = "<pytest>"  # where findings about the whole session are located (as `<string>` for -c)

_KEY = pytest.StashKey[list]()  # on the config: (test id, finding); on an item: its findings
_STATE = pytest.StashKey[Availability]()  # absent when the option is off
_GRAPHS = pytest.StashKey[GraphCounts]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("graphlint", "CUDA graph sanitizer")
    # A bare flag, not an option with an optional value: `pytest --graphlint-sanitize tests/` must
    # keep `tests/` as a path. `--graphlint-sanitize=MODE` is matched as a whole option string.
    group.addoption(
        "--graphlint-sanitize",
        action="store_const",
        const="warn",
        dest="graphlint_sanitize",
        default=None,
        help="run tests under graphlint's CUDA graph sanitizer; =warn (the default) reports, =error fails "
        "tests with findings",
    )
    for mode in ("warn", "error"):
        group.addoption(
            f"--graphlint-sanitize={mode}",
            action="store_const",
            const=mode,
            dest="graphlint_sanitize",
            help=argparse.SUPPRESS,
        )
    group.addoption(
        "--graphlint-sanitize-allow-inactive",
        action="store_true",
        help="with --graphlint-sanitize=error, run the tests even when the sanitizer cannot (no CUDA device, "
        "untested versions); the report still says so (GL500)",
    )
    group.addoption(
        "--graphlint-poison",
        action="store_true",
        help="with --graphlint-sanitize: fill refilled static inputs with NaN after each replay and name the "
        "first output read the NaN reached (GL511); a buggy test's results change on purpose",
    )
    group.addoption(
        "--graphlint-compare-eager",
        action="store_true",
        help="with --graphlint-sanitize: run each captured `with` block again eagerly before each replay, undoing "
        "what it writes, and name the first operator where the replay differs (GL512)",
    )
    group.addoption(
        "--graphlint-no-coverage",
        action="store_true",
        help="with --graphlint-sanitize: do not measure how much GPU work ran from graphs",
    )
    group.addoption("--graphlint-report", default=None, metavar="FILE", help="write the sanitizer's findings as JSON")
    parser.addini("graphlint_sanitize_ignore", "codes the sanitizer does not report", type="args", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "graphlint(ignore=[...]): codes the graphlint sanitizer ignores in this test")
    config.stash[_KEY] = []
    config.stash[_GRAPHS] = GraphCounts()
    if config.getoption("graphlint_sanitize") is None:
        return
    if config.getoption("graphlint_poison") and config.getoption("graphlint_compare_eager"):
        raise pytest.UsageError("--graphlint-poison and --graphlint-compare-eager cannot be combined")
    state = config.stash[_STATE] = availability()
    where = (RUN_LOCATION, 1)  # the session itself: no file of it is where the sanitizer failed
    config.stash[_KEY].extend(("", f) for f in state_findings(state.reason, state.untested, where))
    if state.reason and config.getoption("graphlint_sanitize") == "error":
        if not config.getoption("graphlint_sanitize_allow_inactive"):
            _write_report(config)
            raise pytest.UsageError(
                f"graphlint sanitizer: --graphlint-sanitize=error, but the sanitizer is inactive ({state.reason}); "
                "pass --graphlint-sanitize-allow-inactive to run the tests unsanitized"
            )


def _active(config: pytest.Config) -> bool:
    state = config.stash.get(_STATE, None)
    return state is not None and state.active


def pytest_report_header(config: pytest.Config) -> str | None:
    state = config.stash.get(_STATE, None)
    if state is None:
        return None
    if state.reason:
        return f"graphlint sanitizer: inactive ({state.reason}); tests run unchanged"
    untested = f" on untested versions ({state.untested})" if state.untested else ""
    poison = (
        ", --graphlint-poison (results of stale reads change on purpose)"
        if config.getoption("graphlint_poison")
        else ""
    )
    compare = ", --graphlint-compare-eager" if config.getoption("graphlint_compare_eager") else ""
    return f"graphlint sanitizer: active{untested}, mode {config.getoption('graphlint_sanitize')}{poison}{compare}"


def _ignored(item: pytest.Item) -> set[str]:
    codes = set(item.config.getini("graphlint_sanitize_ignore"))
    for marker in item.iter_markers("graphlint"):
        codes |= set(marker.kwargs.get("ignore", ()))
    return codes


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if not _active(item.config):
        yield
        return
    from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard

    guard = ReplayGuard(
        poison=item.config.getoption("graphlint_poison"),
        coverage=not item.config.getoption("graphlint_no_coverage"),
        compare_eager=item.config.getoption("graphlint_compare_eager"),
    )
    guard.findings = item.stash.setdefault(_KEY, [])  # the same list the fixture hands the test
    guard.install()
    try:
        yield
    finally:
        guard.uninstall()
        guard.findings[:] = finish(guard.findings, _ignored(item))
        item.config.stash[_KEY].extend((item.nodeid, f) for f in guard.findings)
        item.config.stash[_GRAPHS].add(guard.graphs)


@pytest.fixture
def graphlint_findings(request: pytest.FixtureRequest) -> list[Finding]:
    """The findings of the running test, filled in as the test runs under the sanitizer."""
    return request.node.stash.setdefault(_KEY, [])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or item.config.getoption("graphlint_sanitize") != "error":
        return
    findings = [f for f in item.stash.get(_KEY, []) if not f.informational]
    if findings and report.passed:
        report.outcome = "failed"
        report.longrepr = "graphlint sanitizer findings:\n" + "\n".join(
            f"  {f.path}:{f.line}: {f.code} [{f.name}] {f.message}" for f in findings
        )


def _write_report(config: pytest.Config) -> None:
    path = config.getoption("--graphlint-report")
    if path:
        rows = [{**f.to_dict(), "test": nodeid} for nodeid, f in config.stash.get(_KEY, [])]
        try:
            Path(path).write_text(json.dumps(rows, indent=2) + "\n")
        except OSError as error:  # a report that cannot be written does not fail a passing suite
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            message = f"graphlint sanitizer: warning: cannot write --graphlint-report {path}: {error.strerror or error}"
            if reporter is not None:
                reporter.write_line(message, yellow=True)
            else:
                print(message, file=sys.stderr)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    _write_report(config)
    collected = config.stash.get(_KEY, [])
    if config.stash.get(_STATE, None) is None:
        return
    terminalreporter.write_sep("=", "graphlint sanitizer")
    for nodeid, finding in collected:
        where = f"{nodeid}: " if nodeid else ""
        terminalreporter.write_line(
            f"{where}{finding.code} [{finding.name}] {finding.message} ({finding.path}:{finding.line})"
        )
    if _active(config):
        terminalreporter.write_line(f"graphs: {config.stash[_GRAPHS].summary()}")
