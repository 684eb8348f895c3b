"""The `graphlint` command line: check, rule, rules.

Exit status: 0 no findings (or `--exit-zero`), 1 findings, 2 usage, configuration or
internal error.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import gc
import io
import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from graphlint import __version__
from graphlint.config import ConfigError, ConfigResolver, Selection, validate_selectors
from graphlint.config_flags import add_config_flags, render_settings, resolver_from_args
from graphlint.findings import Finding, cell_prefix
from graphlint.fixing.apply import SourceText, fix_file, replace_if_unchanged, source_text
from graphlint.registry import all_rules, get_rule
from graphlint.reporters import FORMATS, ReportContext, render

if TYPE_CHECKING:  # the engine (and networkx, libcst behind it) loads only for a command that checks
    from graphlint.engine import CheckOptions, CheckResult
    from graphlint.sources.notebooks import Notebook

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
    _add_check_parser(commands)
    _add_sanitize_parser(commands)
    captures_parser = commands.add_parser(
        "captures", help="list every capture region found, what it captures and how much code it reaches"
    )
    _add_project_options(captures_parser, formats=("text", "json"))
    _add_follow_values(captures_parser)
    commands.add_parser(
        "server", help="run the language server on stdio (needs the server extra: pip install '.[server]')"
    )
    callgraph_parser = commands.add_parser(
        "callgraph", help="print the resolved call graph of PATH as JSON in PyCG's shape ({caller: [callees]})"
    )
    _add_project_options(callgraph_parser, formats=("json",))
    rule_parser = commands.add_parser("rule", help="print a rule's documentation")
    rule_parser.add_argument("code")
    commands.add_parser("rules", help="list every rule")
    return parser


def _add_check_parser(commands: argparse._SubParsersAction) -> None:
    check_parser = commands.add_parser("check", help="check Python files for CUDA graph hazards")
    check_parser.add_argument(
        "paths", nargs="*", default=["."], metavar="PATH", help="files or directories (default: .)"
    )
    check_parser.add_argument(
        "--select", action="append", metavar="CODES", help="only these codes or prefixes (GL1, GL101)"
    )
    check_parser.add_argument("--ignore", action="append", metavar="CODES", help="codes or prefixes to leave out")
    check_parser.add_argument("--extend-select", action="append", metavar="CODES", help="codes to add to the selection")
    check_parser.add_argument(
        "--preview",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="enable preview rules (below 90%% precision on the real-code corpus); overrides `preview` in the config",
    )
    _add_follow_values(check_parser)
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
    _add_cache_options(check_parser)
    add_config_flags(check_parser, per_file_ignores=True)
    check_parser.add_argument(
        "--show-files", action="store_true", help="list the files that would be checked, and exit"
    )
    check_parser.add_argument(
        "--show-settings", action="store_true", help="print the resolved settings of the first PATH, and exit"
    )
    check_parser.add_argument(
        "-v", "--verbose", action="store_true", help="print the traceback of every internal error (GL002)"
    )
    _add_check_extras(check_parser)


def _add_sanitize_parser(commands: argparse._SubParsersAction) -> None:
    sanitize_parser = commands.add_parser(
        "sanitize",
        help="run a program under the runtime sanitizer: graphlint sanitize -- python SCRIPT [ARGS]",
    )
    sanitize_parser.add_argument("--mode", choices=("warn", "error"), default="warn")
    sanitize_parser.add_argument("--report", metavar="FILE", help="also write the findings to FILE")
    sanitize_parser.add_argument("--format", choices=FORMATS, default="json", help="format of --report (default json)")
    sanitize_parser.add_argument(
        "--summary-report",
        metavar="FILE",
        help="also write the run's summary as JSON: graphs seen, analysed and refused, --poison counts, and the "
        "coverage report",
    )
    sanitize_parser.add_argument(
        "--graph-dir", metavar="DIR", help="draw each analysed graph as DIR/NAME.svg and DIR/NAME.html"
    )
    sanitize_parser.add_argument(
        "--poison",
        action="store_true",
        help="fill refilled static inputs with NaN after each replay and name the first output read that the "
        "NaN reached (GL511); changes a buggy program's results on purpose",
    )
    sanitize_parser.add_argument(
        "--compare-eager",
        action="store_true",
        help="run each captured `with torch.cuda.graph` block again eagerly before each replay, undoing what it "
        "writes, and name the first operator where the replay differs (GL512); about doubles the run's GPU work",
    )
    sanitize_parser.add_argument(
        "--no-coverage",
        dest="coverage",
        action="store_false",
        help="do not measure how much GPU work ran from graphs (the coverage report runs torch's profiler, CUDA "
        "activity only)",
    )
    sanitize_parser.add_argument(
        "--require-graphed",
        metavar="PCT",
        type=_percentage,
        default=None,
        help="exit 1 when fewer than PCT percent of the run's kernel launches ran from CUDA graphs (or the share "
        "could not be measured)",
    )
    sanitize_parser.add_argument(
        "--allow-inactive",
        action="store_true",
        help="with --mode error, do not fail when the sanitizer could not run (no CUDA device, untested versions)",
    )
    sanitize_parser.add_argument(
        "program", nargs=argparse.REMAINDER, help="-- python [FLAGS] SCRIPT [ARGS] | -m MODULE | -c CODE"
    )


def _add_project_options(parser: argparse.ArgumentParser, formats: tuple[str, ...]) -> None:
    """The options of the commands that report on the project as a whole (captures, callgraph)."""
    parser.add_argument("paths", nargs="*", default=["."], metavar="PATH")
    parser.add_argument("--format", choices=formats, default=formats[0])
    add_config_flags(parser, per_file_ignores=False)
    parser.add_argument("--jobs", type=_positive, default=None, metavar="N")
    _add_cache_options(parser)


def _add_follow_values(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--follow-values",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="reach captured code through the value flow too (callables held in attributes, parameters, "
        "containers); experimental, off by default; overrides `follow-values` in the config",
    )


def _add_cache_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write .graphlint_cache/")
    parser.add_argument("--cache-dir", metavar="DIR", help="cache directory (default: ./.graphlint_cache)")


def _add_check_extras(check_parser: argparse.ArgumentParser) -> None:
    """Flags users bring from ruff: quieter output, colour control, a list of what --fix did."""
    check_parser.add_argument(
        "-q", "--quiet", action="store_true", help="print the findings only: no summary, no notes"
    )
    check_parser.add_argument("--show-fixes", action="store_true", help="with --fix, list the findings fixed")
    check_parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour text output (default auto: on a terminal unless NO_COLOR is set)",
    )
    _add_partial_run_flags(check_parser)
    _add_adoption_flags(check_parser)


def _add_partial_run_flags(check_parser: argparse.ArgumentParser) -> None:
    """What pre-commit and editor integrations pass: stdin, its file name, exclusion of named files."""
    check_parser.add_argument(
        "--stdin-filename",
        metavar="PATH",
        help="with `-`: the path of the source read from stdin (configuration, per-file ignores, messages)",
    )
    check_parser.add_argument(
        "--force-exclude",
        action="store_true",
        help="apply exclude/extend-exclude to files named on the command line too",
    )


def _add_adoption_flags(check_parser: argparse.ArgumentParser) -> None:
    """Adopting graphlint on a repository with findings: suppress them in place, or baseline them."""
    check_parser.add_argument(
        "--add-noqa", action="store_true", help="add `# noqa: CODE` to every line with a finding (as ruff)"
    )
    check_parser.add_argument("--baseline", metavar="FILE", help="report only findings that are not in FILE")
    check_parser.add_argument(
        "--write-baseline", metavar="FILE", help="write every current finding to FILE (for --baseline) and exit 0"
    )


def _reader(result: CheckResult):
    """Bytes of a reported file: what the run read, or the disk for project-context files."""
    from graphlint.analysis import read_source

    return lambda display: result.sources.get(display) or read_source(display)[0]


def _add_noqa(args: argparse.Namespace, result: CheckResult) -> int:
    from graphlint.fixing.add_noqa import add_noqa

    added = 0
    for display, found in sorted(_by_path(result.findings).items()):
        data = result.sources.get(display)
        if data is None or display == "-":
            continue
        source = source_text(data)
        if source is None:
            continue
        outcome = add_noqa(source.text, found)
        if outcome.error:
            _note(args, f"graphlint: not adding noqa to {display}: {outcome.error}")
            continue
        for line in outcome.skipped:
            _note(args, f"graphlint: {display}:{line}: no place for a comment on this line; not suppressed")
        notebook = result.notebooks.get(display)
        if outcome.added and _write_edited(display, str(Path(display).resolve()), data, source, outcome.text, notebook):
            added += outcome.added
    _note(args, f"graphlint: added {added} noqa directive{'s' if added != 1 else ''}")
    return EXIT_OK


def _write_baseline(args: argparse.Namespace, result: CheckResult) -> int:
    from graphlint.baseline import write_baseline

    count = write_baseline(Path(args.write_baseline), result.findings, _reader(result))
    _note(args, f"graphlint: wrote {count} finding{'s' if count != 1 else ''} to {args.write_baseline}")
    return EXIT_OK


def _apply_baseline(args: argparse.Namespace, result: CheckResult) -> CheckResult:
    from graphlint.baseline import BaselineError, load_baseline, new_findings

    file = Path(args.baseline)
    try:
        known = load_baseline(file)
    except BaselineError as error:
        raise _UsageError(str(error)) from None
    result.findings = new_findings(result.findings, file, known, _reader(result))
    return result


def _read_stdin(args: argparse.Namespace) -> None:
    """`-` reads the source from stdin; it is checked as if it were at `--stdin-filename`."""
    args.unsaved = {}
    if "-" not in args.paths:
        if args.stdin_filename:
            raise _UsageError("--stdin-filename needs `-` among the paths")
        return
    if args.paths != ["-"]:
        raise _UsageError("`-` (stdin) cannot be combined with other paths")
    name = args.stdin_filename or "-"
    args.paths = [name]
    args.unsaved = {Path(name).resolve(): sys.stdin.buffer.read()}


def _run_check(args: argparse.Namespace, resolver: ConfigResolver, options: CheckOptions) -> CheckResult:
    """Named files (pre-commit, editors, stdin) are checked in their project's context."""
    from graphlint.engine import check
    from graphlint.project_context import check_in_project

    if args.paths == ["-"]:  # stdin without a file name: nothing to place it in a project
        return check(args.paths, resolver, options, args.unsaved)
    return check_in_project(args.paths, resolver, options, args.unsaved, force_exclude=args.force_exclude)


def _fix_stdin(args: argparse.Namespace, resolver: ConfigResolver, options: CheckOptions) -> int:
    """`--fix` on stdin, as ruff does: the fixed source on stdout, remaining findings on stderr."""
    path = Path(args.paths[0]).resolve()
    if path.name.endswith(".ipynb"):
        raise _UsageError("--fix on stdin takes Python source, not a notebook: name the notebook's file instead")
    data = args.unsaved[path]
    result = _run_check(args, resolver, options)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        sys.stdout.buffer.write(data)
        return _stdin_report(args, result)
    for _ in range(_MAX_FIX_PASSES):
        outcome = fix_file(
            args.paths[0], text, [f for f in result.findings if f.path == args.paths[0]], args.unsafe_fixes
        )
        if outcome.error:
            _note(args, f"graphlint: not fixing {args.paths[0]}: {outcome.error}; the source is unchanged")
        if outcome.error or not outcome.applied:
            break
        text = outcome.fixed
        args.unsaved = {path: text.encode("utf-8")}
        result = _run_check(args, resolver, options)
    sys.stdout.write(("\ufeff" if data.startswith(b"\xef\xbb\xbf") else "") + text)
    return _stdin_report(args, result)


def _stdin_report(args: argparse.Namespace, result: CheckResult) -> int:
    context = ReportContext(files=tuple(f.display for f in result.files), summary=not args.quiet)
    sys.stderr.write(render(args.format, _with_fix_edits(args.format, result), context))
    return EXIT_OK if args.exit_zero or not result.findings else EXIT_FINDINGS


def _use_color(args: argparse.Namespace) -> bool:
    if args.format != "text" or args.color == "never":
        return False
    if args.color == "always":
        return True
    return args.output_file is None and sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _require_paths_exist(paths: list[str]) -> None:
    """A path that does not exist is a typo on the command line (exit 2), not a finding."""
    for path in paths:
        if path != "-" and not os.path.lexists(path):
            raise _UsageError(f"no such file or directory: {path}")


def _note(args: argparse.Namespace, message: str) -> None:
    """A line for the person at the terminal (stderr); `--quiet` silences it."""
    if not args.quiet:
        print(message, file=sys.stderr)


def _report_fixed(args: argparse.Namespace, fixed: list[Finding]) -> None:
    """`--show-fixes`: what `--fix` changed, per file and code, as ruff lists it."""
    if not args.show_fixes or not fixed or args.quiet:
        return
    lines = [f"Fixed {len(fixed)} finding{'s' if len(fixed) != 1 else ''}:"]
    for path, found in sorted(_by_path(fixed).items()):
        lines.append(f"- {path}:")
        for finding in sorted(found, key=Finding.sort_key):
            assert finding.fix is not None  # only a finding with a fix is fixed
            where = f"{cell_prefix(finding.cell)}{finding.line}:{finding.column}"
            lines.append(f"    {where} {finding.code} [{finding.name}] {finding.fix.message}")
    print("\n".join(lines), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    _escape_unencodable_output()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in ("check", "captures", "callgraph"):
        _collect_less_often()
    try:
        if args.command == "check":
            return _check(args)
        if args.command == "rule":
            return _rule(args.code)
        if args.command == "sanitize":
            return _sanitize(args)
        if args.command == "rules":
            return _rules()
        if args.command == "captures":
            return _captures(args)
        if args.command == "callgraph":
            return _callgraph(args)
        if args.command == "server":
            return _server()
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    except (ConfigError, _UsageError) as error:
        print(f"graphlint: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `graphlint rules | head`: the reader left; nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception:
        print("graphlint: internal error (please report this):", file=sys.stderr)
        traceback.print_exc()
        return EXIT_ERROR


def _escape_unencodable_output() -> None:
    """Write whatever stdout and stderr can encode: a non-ASCII path on an ASCII terminal, or
    a file name that is not UTF-8 (held as surrogates), comes out backslash-escaped instead of
    losing the report to a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, io.UnsupportedOperation):
                reconfigure(errors="backslashreplace")


def _collect_less_often() -> None:
    """A batch run builds many long-lived objects (trees, summaries, the value flow) and frees
    few, so the cycle collector's default thresholds walk an ever larger heap for little: about
    a quarter of a cold run's CPU on the corpus. Collect young objects less often (mypy does the
    same); the heap grows a little (tensordict: 102 to 121 MB peak)."""
    gc.set_threshold(100_000, 50, 100)


def _sanitize(args: argparse.Namespace) -> int:
    from graphlint.runtime_sanitizer.analysis.postprocess import finish
    from graphlint.runtime_sanitizer.analysis.report import state_findings
    from graphlint.runtime_sanitizer.run_program import UsageError, interpreter_arguments, program_name, run

    command = args.program[1:] if args.program[:1] == ["--"] else args.program
    try:
        if args.poison:
            print(
                "graphlint sanitize: --poison: stale static-input memory is filled with NaN; a program that reads "
                "it computes different results, on purpose",
                file=sys.stderr,
            )
        if args.require_graphed is not None and not args.coverage:
            raise _UsageError("--require-graphed needs the coverage report: drop --no-coverage")
        if args.poison and args.compare_eager:
            raise _UsageError("--poison and --compare-eager cannot be combined: poison changes what a replay reads")
        outcome = run(
            command,
            graph_dir=args.graph_dir,
            poison=args.poison,
            coverage=args.coverage,
            compare_eager=args.compare_eager,
        )
        where = (program_name(interpreter_arguments(command)), 1)
    except UsageError as error:
        raise _UsageError(str(error)) from None
    findings = finish(outcome.findings + state_findings(outcome.reason, outcome.untested, where))
    _print_sanitize_summary(outcome, findings, args.poison)
    if args.report:
        files = tuple(sorted({f.path for f in findings}))
        _write_output(args.report, render(args.format, findings, ReportContext(files=files)))
    if args.summary_report:
        summary = {"status": outcome.status, "inactive": outcome.reason, **outcome.graphs.to_dict()}
        _write_output(args.summary_report, json.dumps(summary, indent=2) + "\n")
    if outcome.status == 0 and _below_required(outcome.graphs.coverage, args.require_graphed):
        return EXIT_FINDINGS
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


def _percentage(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"a percentage is between 0 and 100, not {value:g}")
    return value


def _below_required(coverage, required: float | None) -> bool:
    """`--require-graphed PCT`: does the run fall short (or give no share to judge)? Says why."""
    if required is None or (coverage is not None and not coverage.below(required)):
        return False
    share = coverage.launch_share() if coverage is not None else None
    shown = "no share was measured" if share is None else f"{share:.1f}% of kernel launches ran from graphs"
    print(f"graphlint sanitize: --require-graphed {required:g}: {shown}", file=sys.stderr)
    return True


def _print_sanitize_summary(outcome, findings: list[Finding], poison: bool = False) -> None:
    """Findings, then one line on what was checked: never `clean` when nothing or not all was.
    An inactive run says the program ran unchanged, except under --poison when the report was
    lost: the guard may have poisoned memory until the program ended (a crash, a timeout)."""
    from graphlint.reporters.text import format_finding

    if outcome.reason:
        changed = poison and outcome.report_lost
        ran = "--poison may have changed what it computed before it ended" if changed else "the program ran unchanged"
        print(f"graphlint sanitize: inactive ({outcome.reason}); {ran}", file=sys.stderr)
    for finding in findings:
        print(format_finding(finding), file=sys.stderr)
    if outcome.reason:
        return
    count = f"{len(findings)} finding{'s' if len(findings) != 1 else ''}"
    print(f"graphlint sanitize: {count}; {outcome.graphs.summary()}", file=sys.stderr)


def _captures(args: argparse.Namespace) -> int:
    from graphlint.checkers.machinery.project.captures import capture_report
    from graphlint.engine import CheckOptions, default_jobs, load_project
    from graphlint.reporters.captures import render_captures

    options = CheckOptions(
        jobs=args.jobs or default_jobs(), cache_dir=_cache_dir(args), follow_values=args.follow_values
    )
    notebooks: dict[str, Notebook] = {}
    _, project = load_project(args.paths, resolver_from_args(args), options, notebooks)
    sys.stdout.write(render_captures(capture_report(project), args.format, notebooks))
    return EXIT_OK


def _server() -> int:
    """The language server; pygls is an optional extra, so say how to get it."""
    try:
        from graphlint.server.language_server import main as serve
    except ImportError as error:
        raise _UsageError(
            "graphlint server needs pygls: pip install '.[server]' from a clone, 'cuda-graphlint[server]' "
            f"from the index ({error})"
        ) from None
    return serve()


def _callgraph(args: argparse.Namespace) -> int:
    import json

    from graphlint.checkers.machinery.project.callgraph_json import call_graph
    from graphlint.engine import CheckOptions, default_jobs, load_project

    # The exported graph always follows values: it is the call graph, measured against PyCG's.
    options = CheckOptions(jobs=args.jobs or default_jobs(), cache_dir=_cache_dir(args), follow_values=True)
    _, project = load_project(args.paths, resolver_from_args(args), options)
    sys.stdout.write(json.dumps(call_graph(project), indent=2) + "\n")
    return EXIT_OK


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
    tty = sys.stdout.isatty()  # cut long summaries on a terminal only: a pipe or a file gets them whole
    for code, rule in rules.items():
        fix = {"safe": "fix", "unsafe": "fix*", None: ""}[rule.fix]
        status = "preview" if rule.preview else ""
        summary = rule.summary if len(rule.summary) <= 90 or not tty else rule.summary[:87] + "..."
        print(f"{code}  {rule.name:<{width}}  {rule.severity:<7}  {fix:<4}  {status:<7}  {summary}")
    return EXIT_OK


def _options(args: argparse.Namespace) -> CheckOptions:
    from graphlint.engine import CheckOptions, default_jobs

    selection = Selection(
        select=_codes(args.select, "--select"),
        ignore=_codes(args.ignore, "--ignore") or (),
        extend_select=_codes(args.extend_select, "--extend-select") or (),
        preview=args.preview,
    )
    return CheckOptions(
        selection=selection,
        jobs=args.jobs or default_jobs(),
        cache_dir=_cache_dir(args),
        follow_values=args.follow_values,
    )


def _cache_dir(args: argparse.Namespace) -> Path | None:
    from graphlint.caching.store import CACHE_DIR_NAME

    if args.no_cache:
        return None
    return Path(args.cache_dir or os.environ.get("GRAPHLINT_CACHE_DIR") or CACHE_DIR_NAME)


def _check(args: argparse.Namespace) -> int:
    if args.unsafe_fixes and not (args.fix or args.diff):
        raise _UsageError("--unsafe-fixes needs --fix or --diff")
    options = _options(args)
    resolver = resolver_from_args(args)
    _require_paths_exist(args.paths)
    if args.show_files or args.show_settings:
        return _show(args, resolver, options)
    _read_stdin(args)
    if args.fix and args.unsaved:
        return _fix_stdin(args, resolver, options)
    if args.diff:
        return _diff(args, resolver, options)
    result = _run_check(args, resolver, options)
    if not result.files:
        _note(args, "graphlint: warning: No Python files found under the given path(s)")
        if args.format == "text":
            return EXIT_OK
    if args.add_noqa:
        return _add_noqa(args, result)
    if args.write_baseline:
        return _write_baseline(args, result)
    if args.fix:
        result = _fix_loop(args, resolver, options, result)
    if args.baseline:
        result = _apply_baseline(args, result)
    _emit(args, result)
    for warning in result.warnings:
        _note(args, f"graphlint: warning: {warning}")
    if result.internal_errors:
        _report_internal_errors(result, args.verbose)
        return EXIT_ERROR
    if args.exit_zero or not result.findings:
        return EXIT_OK
    return EXIT_FINDINGS


def _show(args: argparse.Namespace, resolver: ConfigResolver, options: CheckOptions) -> int:
    """`--show-files` / `--show-settings` (as ruff's): what a run would check, and how."""
    from graphlint.sources.discovery import discover

    paths = [p for p in args.paths if p != "-"] or ["."]
    files = discover(paths, resolver, force_exclude=args.force_exclude)
    if args.show_files:
        sys.stdout.write("".join(f"{source.display}\n" for source in files))
    if args.show_settings:
        named = {os.path.normpath(source.display): source.module for source in files}
        module = named.get(os.path.normpath(paths[0]))
        sys.stdout.write(render_settings(paths[0], resolver, options.selection, module))
    return EXIT_OK


def _report_internal_errors(result: CheckResult, verbose: bool) -> None:
    """After the report: say that graphlint failed somewhere, and where, on stderr."""
    count = len(result.internal_errors)
    print(
        f"graphlint: {count} internal error{'s' if count != 1 else ''} (GL002): the rest of the run was checked; "
        + ("tracebacks follow" if verbose else "run with --verbose for the tracebacks and please report them"),
        file=sys.stderr,
    )
    if verbose:
        for finding in result.internal_errors:
            trace = result.tracebacks.get((finding.path, finding.line, finding.message), "")
            print(f"--- {finding.path}:{finding.line}: {finding.message}\n{trace}", file=sys.stderr)


def _emit(args: argparse.Namespace, result: CheckResult) -> None:
    context = ReportContext(
        files=tuple(f.display for f in result.files), color=_use_color(args), summary=not args.quiet
    )
    if args.statistics:
        from graphlint.reporters import json_report, text

        report = (
            json_report.render_statistics(result.findings)
            if args.format == "json"
            else text.render_statistics(result.findings, context)
        )
    else:
        report = render(args.format, _with_fix_edits(args.format, result), context)
    if args.output_file:
        _write_output(args.output_file, report)
    else:
        sys.stdout.write(report)


def _write_output(name: str, report: str) -> None:
    """Write a report file (its folder made if missing); a clean error when it cannot be.
    A path that is not UTF-8 (a file name's surrogates) is written backslash-escaped."""
    output = Path(name)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(report, encoding="utf-8", errors="backslashreplace")
    except OSError as error:
        raise _UsageError(f"cannot write {name}: {error.strerror or error}") from None


def _with_fix_edits(fmt: str, result: CheckResult) -> list[Finding]:
    """The findings as shown (a notebook's in their cells), with their fixes' text edits where the
    format shows them (JSON, SARIF, rdjson)."""
    if fmt not in ("json", "sarif", "rdjson") or not any(f.fix is not None for f in result.findings):
        return _located(result.findings, result)
    from graphlint.fixing.edits import with_edits  # libcst: only for a report that shows fixes

    return _located(with_edits(result.findings, result.sources), result)


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
    passes = _fix_passes(args, resolver, options, result, _write_edited)
    fixed_total, fixed_files = len(passes.applied), len(passes.texts)
    if fixed_total:
        _note(
            args,
            f"graphlint: fixed {fixed_total} finding{'s' if fixed_total != 1 else ''} in {fixed_files} file{'s' if fixed_files != 1 else ''}",
        )
    _report_fixed(args, passes.applied)
    return passes.result


@dataclass
class _FixPasses:
    """What the fix passes did: the last check, the findings fixed, and for each edited file
    its text before the first pass and after the last."""

    result: CheckResult
    applied: list[Finding] = field(default_factory=list)
    texts: dict[str, tuple[str, str]] = field(default_factory=dict)
    notebooks: dict[str, Notebook | None] = field(default_factory=dict)  # as first read: a diff's "before"


def _fix_passes(
    args: argparse.Namespace,
    resolver: ConfigResolver,
    options: CheckOptions,
    result: CheckResult,
    keep: Callable[[str, str, bytes, SourceText, str, Notebook | None], bool],
) -> _FixPasses:
    """Fix, re-check, fix again until nothing changes: the one loop of `--fix` and `--diff`, so
    the diff is what `--fix` writes (a fix that waits for a later pass included). ``keep`` takes
    each edited file's text (writes it, or holds it for the next check); whether it did."""
    passes = _FixPasses(result)
    refused: set[str] = set()
    for _ in range(_MAX_FIX_PASSES):
        changed = False
        paths = _source_paths(result)
        for display, found in sorted(_by_path(result.findings).items()):
            data = result.sources.get(display)
            if data is None or display in refused:
                continue
            source = source_text(data)
            if source is None:
                continue
            outcome = fix_file(display, source.text, found, args.unsafe_fixes)
            if outcome.error:
                refused.add(display)
                print(f"graphlint: not fixing {display}: {outcome.error}; the file is unchanged", file=sys.stderr)
                continue
            if not outcome.applied:
                continue
            notebook = result.notebooks.get(display)
            if not keep(display, paths[display], data, source, outcome.fixed, notebook):
                refused.add(display)
                continue
            passes.applied.extend(_located(outcome.applied, result))
            passes.texts[display] = (passes.texts.get(display, (source.text, ""))[0], outcome.fixed)
            passes.notebooks.setdefault(display, notebook)
            changed = True
        if not changed:
            break
        result = passes.result = _run_check(args, resolver, options)
    return passes


def _write_edited(
    display: str, path: str, read: bytes, source: SourceText, text: str, notebook: Notebook | None = None
) -> bool:
    """Write an edited file in its own encoding unless it changed since the run read it (the
    user's edit wins; the file is skipped with a note); whether it was written. A notebook's
    edited code goes back into its cells, and its JSON is what is compared and replaced."""
    if notebook is not None:
        read, data, reason = notebook.raw, *notebook.edited(text)
    else:
        data = source.encode(text)
        reason = f"the edit does not fit its encoding ({source.encoding})" if data is None else None
    if reason is None and data is not None:
        reason = replace_if_unchanged(path, read, data)
    if reason is not None:
        print(f"graphlint: not writing {display}: {reason}; the file is unchanged", file=sys.stderr)
        return False
    return True


def _located(findings: list[Finding], result: CheckResult) -> list[Finding]:
    """The findings as reports show them: a notebook's in their cells."""
    from graphlint.sources.notebooks import locate_in_cells

    return locate_in_cells(findings, result.notebooks)


def _file_diff(display: str, original: str, fixed: str, notebook: Notebook | None) -> str:
    """The unified diff of one file's fixes; a notebook's per changed cell."""
    if notebook is not None:
        from graphlint.sources.notebooks import NotebookError

        try:
            return notebook.cell_diff(display, fixed)
        except NotebookError as error:
            print(f"graphlint: cannot fix {display}: {error}", file=sys.stderr)
            return ""
    lines = difflib.unified_diff(
        original.splitlines(keepends=True),
        fixed.splitlines(keepends=True),
        fromfile=f"a/{display}",
        tofile=f"b/{display}",
    )
    return "".join(lines)


def _diff(args: argparse.Namespace, resolver: ConfigResolver, options: CheckOptions) -> int:
    def hold(display: str, path: str, read: bytes, source: SourceText, text: str, notebook: Notebook | None) -> bool:
        if notebook is not None:
            data, reason = notebook.edited(text)
        else:
            data = source.encode(text)
            reason = f"the edit does not fit its encoding ({source.encoding})" if data is None else None
        if data is None:
            print(f"graphlint: not fixing {display}: {reason}", file=sys.stderr)
            return False
        args.unsaved = {**args.unsaved, Path(path): data}  # the next check reads the edit; the disk is untouched
        return True

    passes = _fix_passes(args, resolver, options, _run_check(args, resolver, options), hold)
    chunks = [
        _file_diff(display, original, fixed, passes.notebooks.get(display))
        for display, (original, fixed) in sorted(passes.texts.items())
    ]
    text = "".join(chunks)
    if args.output_file:
        _write_output(args.output_file, text)
    else:
        sys.stdout.write(text)
    if args.exit_zero or not text:
        return EXIT_OK
    return EXIT_FINDINGS
