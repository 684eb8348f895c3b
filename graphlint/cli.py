"""The `graphlint` command line: check, rule, rules.

Exit status: 0 no findings (or `--exit-zero`), 1 findings, 2 usage, configuration or
internal error.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import traceback
from pathlib import Path

from graphlint import __version__
from graphlint.cache import CACHE_DIR_NAME
from graphlint.config import ConfigError, ConfigResolver, Selection, validate_selectors
from graphlint.engine import CheckOptions, CheckResult, check, default_jobs
from graphlint.findings import Finding
from graphlint.fixes import fix_file, write_atomic
from graphlint.registry import all_rules, get_rule
from graphlint.reporters import FORMATS, ReportContext, render

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
_MAX_FIX_PASSES = 10


class _UsageError(Exception):
    pass


def _codes(values: list[str] | None, flag: str) -> tuple[str, ...] | None:
    if values is None:
        return None
    raw = [part for value in values for part in value.split(",")]
    try:
        return validate_selectors(raw, flag)
    except ConfigError as error:
        raise _UsageError(str(error)) from None


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphlint",
        description="A linter and runtime sanitizer for CUDA graph safety in PyTorch code.",
    )
    parser.add_argument("--version", action="version", version=f"graphlint {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check_parser = commands.add_parser("check", help="check Python files for CUDA graph hazards")
    check_parser.add_argument(
        "paths", nargs="*", default=["."], metavar="PATH", help="files or directories (default: .)"
    )
    check_parser.add_argument(
        "--select", action="append", metavar="CODES", help="only these codes or prefixes (GL1, GL101)"
    )
    check_parser.add_argument("--ignore", action="append", metavar="CODES", help="codes or prefixes to leave out")
    check_parser.add_argument("--extend-select", action="append", metavar="CODES", help="codes to add to the selection")
    check_parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    check_parser.add_argument("--output-file", metavar="FILE", help="write the report to FILE instead of stdout")
    check_parser.add_argument("--fix", action="store_true", help="apply safe fixes")
    check_parser.add_argument(
        "--unsafe-fixes", action="store_true", help="with --fix or --diff, apply unsafe fixes too"
    )
    check_parser.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; write nothing")
    check_parser.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    check_parser.add_argument(
        "--statistics", action="store_true", help="count findings per code instead of listing them"
    )
    check_parser.add_argument(
        "--jobs", type=_positive, default=None, metavar="N", help="worker processes (default: all cores)"
    )
    check_parser.add_argument("--no-cache", action="store_true", help="neither read nor write .graphlint_cache/")
    check_parser.add_argument("--cache-dir", metavar="DIR", help="cache directory (default: ./.graphlint_cache)")
    check_parser.add_argument("--config", metavar="FILE", help="use this configuration for every file")

    sanitize_parser = commands.add_parser(
        "sanitize",
        help="run a program under the runtime sanitizer: graphlint sanitize -- python SCRIPT [ARGS]",
    )
    sanitize_parser.add_argument("--mode", choices=("warn", "error"), default="warn")
    sanitize_parser.add_argument("--report", metavar="FILE", help="also write the findings to FILE")
    sanitize_parser.add_argument("--format", choices=FORMATS, default="json", help="format of --report (default json)")
    sanitize_parser.add_argument(
        "--allow-inactive",
        action="store_true",
        help="with --mode error, do not fail when the sanitizer could not run (no CUDA device, untested versions)",
    )
    sanitize_parser.add_argument(
        "program", nargs=argparse.REMAINDER, help="-- python [FLAGS] SCRIPT [ARGS] | -m MODULE | -c CODE"
    )

    rule_parser = commands.add_parser("rule", help="print a rule's documentation")
    rule_parser.add_argument("code")
    commands.add_parser("rules", help="list every rule")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            return _check(args)
        if args.command == "rule":
            return _rule(args.code)
        if args.command == "sanitize":
            return _sanitize(args)
        if args.command == "rules":
            return _rules()
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    except (ConfigError, _UsageError) as error:
        print(f"graphlint: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception:
        print("graphlint: internal error (please report this):", file=sys.stderr)
        traceback.print_exc()
        return EXIT_ERROR


def _sanitize(args: argparse.Namespace) -> int:
    from graphlint.runtime_sanitizer.postprocess import finish
    from graphlint.runtime_sanitizer.report import state_findings
    from graphlint.runtime_sanitizer.run_program import UsageError, interpreter_arguments, program_name, run

    command = args.program[1:] if args.program[:1] == ["--"] else args.program
    try:
        outcome = run(command)
        where = (program_name(interpreter_arguments(command)), 1)
    except UsageError as error:
        raise _UsageError(str(error)) from None
    findings = finish(outcome.findings + state_findings(outcome.reason, outcome.untested, where))
    _print_sanitize_summary(outcome, findings)
    if args.report:
        files = tuple(sorted({f.path for f in findings}))
        Path(args.report).write_text(render(args.format, findings, ReportContext(files=files)), encoding="utf-8")
    if args.mode == "error" and outcome.status == 0:
        if outcome.reason and not args.allow_inactive:
            print(
                "graphlint sanitize: error: --mode error needs an active sanitizer (--allow-inactive accepts "
                "an inactive one)",
                file=sys.stderr,
            )
            return EXIT_FINDINGS
        if any(not f.informational for f in findings):
            return EXIT_FINDINGS
    return outcome.status


def _print_sanitize_summary(outcome, findings: list[Finding]) -> None:
    """Findings, then one line on what was checked: never `clean` when nothing or not all was."""
    from graphlint.reporters.text import format_finding

    if outcome.reason:
        print(f"graphlint sanitize: inactive ({outcome.reason}); the program ran unchanged", file=sys.stderr)
    for finding in findings:
        print(format_finding(finding), file=sys.stderr)
    if outcome.reason:
        return
    count = f"{len(findings)} finding{'s' if len(findings) != 1 else ''}"
    print(f"graphlint sanitize: {count}; {outcome.graphs.summary()}", file=sys.stderr)


def _rule(code: str) -> int:
    try:
        rule = get_rule(code)
    except KeyError:
        print(f"graphlint: error: unknown rule {code!r}; `graphlint rules` lists them", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(rule.doc_page())
    return EXIT_OK


def _rules() -> int:
    rules = all_rules()
    width = max(len(rule.name) for rule in rules.values())
    for code, rule in rules.items():
        fix = {"safe": "fix", "unsafe": "fix*", None: ""}[rule.fix]
        summary = rule.summary if len(rule.summary) <= 90 else rule.summary[:87] + "..."
        print(f"{code}  {rule.name:<{width}}  {rule.severity:<7}  {fix:<4}  {summary}")
    return EXIT_OK


def _options(args: argparse.Namespace) -> CheckOptions:
    selection = Selection(
        select=_codes(args.select, "--select"),
        ignore=_codes(args.ignore, "--ignore") or (),
        extend_select=_codes(args.extend_select, "--extend-select") or (),
    )
    if args.no_cache:
        cache_dir = None
    else:
        cache_dir = Path(args.cache_dir or os.environ.get("GRAPHLINT_CACHE_DIR") or CACHE_DIR_NAME)
    return CheckOptions(selection=selection, jobs=args.jobs or default_jobs(), cache_dir=cache_dir)


def _check(args: argparse.Namespace) -> int:
    if args.unsafe_fixes and not (args.fix or args.diff):
        raise _UsageError("--unsafe-fixes needs --fix or --diff")
    options = _options(args)
    resolver = ConfigResolver(args.config)
    if args.diff:
        return _diff(args, resolver, options)
    result = check(args.paths, resolver, options)
    if args.fix:
        result = _fix_loop(args, resolver, options, result)
    _emit(args, result)
    if args.exit_zero or not result.findings:
        return EXIT_OK
    return EXIT_FINDINGS


def _emit(args: argparse.Namespace, result: CheckResult) -> None:
    to_terminal = args.output_file is None and sys.stdout.isatty()
    context = ReportContext(
        files=tuple(f.display for f in result.files),
        color=to_terminal and args.format == "text" and not os.environ.get("NO_COLOR"),
    )
    if args.statistics:
        from graphlint.reporters import json_report, text

        report = (
            json_report.render_statistics(result.findings)
            if args.format == "json"
            else text.render_statistics(result.findings)
        )
    else:
        report = render(args.format, result.findings, context)
    if args.output_file:
        output = Path(args.output_file)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(report, encoding="utf-8")
    else:
        sys.stdout.write(report)


def _by_path(findings: list[Finding]) -> dict[str, list[Finding]]:
    grouped: dict[str, list[Finding]] = {}
    for finding in findings:
        grouped.setdefault(finding.path, []).append(finding)
    return grouped


def _source_paths(result: CheckResult) -> dict[str, str]:
    return {f.display: str(f.path) for f in result.files}


def _fix_loop(
    args: argparse.Namespace, resolver: ConfigResolver, options: CheckOptions, result: CheckResult
) -> CheckResult:
    fixed_total = 0
    fixed_files: set[str] = set()
    refused: set[str] = set()
    for _ in range(_MAX_FIX_PASSES):
        changed = False
        paths = _source_paths(result)
        for display, found in sorted(_by_path(result.findings).items()):
            data = result.sources.get(display)
            if data is None or display in refused:
                continue
            try:
                original = data.decode("utf-8-sig")
            except UnicodeDecodeError:
                continue
            outcome = fix_file(display, original, found, args.unsafe_fixes)
            if outcome.error:
                refused.add(display)
                print(f"graphlint: not fixing {display}: {outcome.error}; the file is unchanged", file=sys.stderr)
                continue
            if not outcome.applied:
                continue
            fixed = outcome.fixed
            if data.startswith(b"\xef\xbb\xbf"):
                fixed = "\ufeff" + fixed
            write_atomic(paths[display], fixed)
            fixed_total += len(outcome.applied)
            fixed_files.add(display)
            changed = True
        if not changed:
            break
        result = check(args.paths, resolver, options)
    if fixed_total:
        print(
            f"graphlint: fixed {fixed_total} finding{'s' if fixed_total != 1 else ''} in {len(fixed_files)} file{'s' if len(fixed_files) != 1 else ''}",
            file=sys.stderr,
        )
    return result


def _diff(args: argparse.Namespace, resolver: ConfigResolver, options: CheckOptions) -> int:
    result = check(args.paths, resolver, options)
    chunks = []
    for display, found in sorted(_by_path(result.findings).items()):
        data = result.sources.get(display)
        if data is None:
            continue
        try:
            original = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            continue
        outcome = fix_file(display, original, found, args.unsafe_fixes)
        if outcome.error:
            print(f"graphlint: cannot fix {display}: {outcome.error}", file=sys.stderr)
            continue
        if outcome.applied:
            chunks.append(
                "".join(
                    difflib.unified_diff(
                        original.splitlines(keepends=True),
                        outcome.fixed.splitlines(keepends=True),
                        fromfile=f"a/{display}",
                        tofile=f"b/{display}",
                    )
                )
            )
    text = "".join(chunks)
    if args.output_file:
        Path(args.output_file).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    if args.exit_zero or not text:
        return EXIT_OK
    return EXIT_FINDINGS
