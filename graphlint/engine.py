"""One `graphlint check` run: discover, summarise (cached, in parallel), analyse, filter.

The order of everything observable (findings, statistics, reports) is fixed by sorting,
never by completion order, so the output is the same for any ``--jobs`` and for cold and
warm caches.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from graphlint.analysis import read_source, summarize_source
from graphlint.caching.store import SummaryCache, cache_key, run_key
from graphlint.checkers.machinery.core.model import ModuleSummary
from graphlint.checkers.machinery.detectors import static_codes
from graphlint.checkers.machinery.misnamed_modules import misnamed_modules
from graphlint.checkers.machinery.project.phase import Project
from graphlint.checkers.machinery.values.value_facts import VALUE_FACTS
from graphlint.config import ConfigResolver, Selection, enabled_codes, relative_to_root
from graphlint.core_rules import INTERNAL_ERROR, PARSE_ERROR, UNUSED_SUPPRESSION
from graphlint.findings import Finding, sort_findings
from graphlint.pool_workers import worker_pool
from graphlint.registry import all_rules
from graphlint.sources.discovery import SourceFile, discover
from graphlint.sources.notebooks import Notebook, NotebookError, is_notebook, read_notebook
from graphlint.suppressions import SuppressedBlock

_WARNINGS = "|warnings"  # the result cache's key suffix for a run's warnings

# Below this many files to parse, starting worker processes costs more than it saves.
_PARALLEL_THRESHOLD = 24


@dataclass
class CheckResult:
    findings: list[Finding]
    files: list[SourceFile]
    sources: dict[str, bytes] = field(default_factory=dict)  # display path -> bytes read
    cache_hits: int = 0
    cache_misses: int = 0
    # GL002 findings' tracebacks, keyed by (path, line, message), for `--verbose`.
    tracebacks: dict[tuple[str, int, str], str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # what the run could not reach though it read it
    # display path -> the notebook read; its ``sources`` entry is the joined code cells
    notebooks: dict[str, Notebook] = field(default_factory=dict)

    @property
    def internal_errors(self) -> list[Finding]:
        return [f for f in self.findings if f.code == INTERNAL_ERROR.code]


@dataclass(frozen=True)
class CheckOptions:
    selection: Selection = field(default_factory=Selection)
    jobs: int = 1
    cache_dir: Path | None = None  # None: no cache
    follow_values: bool | None = None  # --follow-values / --no-follow-values; None: the config's


def _summarize_job(job: tuple[bytes, str, bool, frozenset[str]]) -> ModuleSummary:
    data, module, is_package, codes = job
    return summarize_source(data, module, is_package, codes)


def active_codes(files: list[SourceFile], selection: Selection) -> frozenset[str]:
    """The static rules enabled for at least one file: the only detectors the run needs."""
    codes: set[str] = set()
    for source in files:
        codes |= enabled_codes(source.settings, selection, relative_to_root(source.path, source.settings))
    return frozenset(codes) & static_codes()


def _read_all(
    files: list[SourceFile],
    codes: frozenset[str],
    unsaved: Mapping[Path, bytes] | None = None,
    notebooks: dict[str, Notebook] | None = None,
) -> tuple[dict[str, bytes], dict[str, str], dict[str, str]]:
    """Bytes and cache keys of every file; the reason for each file that could not be read.
    ``unsaved`` (absolute path -> bytes) stands in for the disk: stdin, an editor's buffer. A
    notebook's bytes are its joined code cells (so its key changes with its code, not its
    outputs), and the notebook itself goes into ``notebooks``."""
    sources: dict[str, bytes] = {}
    keys: dict[str, str] = {}
    errors: dict[str, str] = {}
    for source in files:
        data, error = _unsaved_or_disk(source, unsaved)
        if data is not None and is_notebook(source.path):
            data, error = _notebook_code(source.display, data, notebooks if notebooks is not None else {})
        if data is None:
            errors[source.display] = error or "cannot read file"
            continue
        sources[source.display] = data
        keys[source.display] = cache_key(data, source.module, source.is_package, codes)
    return sources, keys, errors


def _notebook_code(display: str, data: bytes, notebooks: dict[str, Notebook]) -> tuple[bytes | None, str | None]:
    """A notebook's code cells as one module's bytes, or why it is not a notebook (a GL000)."""
    try:
        notebook = read_notebook(data)
    except NotebookError as error:
        return None, str(error)
    notebooks[display] = notebook
    return notebook.python.encode("utf-8"), None


def _unsaved_or_disk(source: SourceFile, unsaved: Mapping[Path, bytes] | None) -> tuple[bytes | None, str | None]:
    if unsaved and source.path in unsaved:
        return unsaved[source.path], None
    return read_source(str(source.path))


def summarize_files(
    files: list[SourceFile],
    sources: dict[str, bytes],
    keys: dict[str, str],
    errors: dict[str, str],
    cache: SummaryCache,
    jobs: int,
    codes: frozenset[str],
) -> dict[str, ModuleSummary]:
    summaries: dict[str, ModuleSummary] = {}
    pending: list[SourceFile] = []
    for source in files:
        if source.display in errors:
            summaries[source.display] = ModuleSummary(module=source.module, error=errors[source.display])
            continue
        cached = cache.get(keys[source.display])
        if cached is not None:
            summaries[source.display] = cached
        else:
            pending.append(source)
    work = [(sources[s.display], s.module, s.is_package, codes) for s in pending]
    if jobs > 1 and len(work) >= _PARALLEL_THRESHOLD:
        workers = min(jobs, len(work))
        with worker_pool(workers) as pool:
            results = list(pool.map(_summarize_job, work, chunksize=max(1, len(work) // (workers * 8))))
    else:
        results = [_summarize_job(job) for job in work]
    for source, summary in zip(pending, results, strict=True):
        summaries[source.display] = summary
        if summary.internal_error is None and (summary.error is None or summary.error.startswith("syntax error")):
            cache.put(keys[source.display], summary)
    cache.save()
    return summaries


def _run_key(files: list[SourceFile], keys: dict[str, str], errors: dict[str, str], selection: Selection) -> str:
    parts = [repr(selection)]
    fingerprints: dict[int, str] = {}
    for source in files:
        settings = source.settings
        fingerprint = fingerprints.get(id(settings))
        if fingerprint is None:
            fingerprint = fingerprints[id(settings)] = repr(
                (
                    settings.source,
                    settings.root,
                    settings.select,
                    settings.ignore,
                    settings.extend_select,
                    settings.per_file_ignores,
                    settings.capture_entry_points,
                    settings.preview,
                )
            )
        parts.append(
            f"{source.display}|{source.module}|{keys.get(source.display) or errors.get(source.display)}|{fingerprint}"
        )
    return run_key(parts)


def check(
    paths: list[str], resolver: ConfigResolver, options: CheckOptions, unsaved: Mapping[Path, bytes] | None = None
) -> CheckResult:
    return check_files(discover(paths, resolver), resolver, options, unsaved)


def check_files(
    files: list[SourceFile],
    resolver: ConfigResolver,
    options: CheckOptions,
    unsaved: Mapping[Path, bytes] | None = None,
) -> CheckResult:
    """Analyse exactly ``files`` together; ``unsaved`` bytes replace what is on disk."""
    follow = follows_values(resolver, options)
    codes = active_codes(files, options.selection) | ({VALUE_FACTS} if follow else set())
    notebooks: dict[str, Notebook] = {}
    sources, keys, errors = _read_all(files, codes, unsaved, notebooks)
    cache = SummaryCache(options.cache_dir)
    whole_run = _run_key(files, keys, errors, options.selection) + ("|values" if follow else "")
    reused = cache.get_result(whole_run) if not errors else None
    if reused is not None:
        warnings = list(cache.get_result(whole_run + _WARNINGS) or ())
        return CheckResult(
            list(reused), files, sources, cache_hits=len(files), cache_misses=0, warnings=warnings, notebooks=notebooks
        )
    summaries = summarize_files(files, sources, keys, errors, cache, options.jobs, codes)
    project = _project(summaries, resolver, codes, follow)
    raw = project.findings()
    raw.extend(_parse_errors(files, summaries))
    internal, tracebacks = _internal_errors(files, summaries, project)
    findings = sort_findings([*_filter(raw, files, summaries, options.selection), *internal])
    warnings = [misnamed.message() for misnamed in misnamed_modules(project)]
    if not errors and not internal:
        cache.put_result(whole_run, findings)
        if warnings:  # rare: kept apart so that a run without them writes the results once
            cache.put_result(whole_run + _WARNINGS, warnings)
    return CheckResult(findings, files, sources, cache.hits, cache.misses, tracebacks, warnings, notebooks)


def follows_values(resolver: ConfigResolver, options: CheckOptions) -> bool:
    """Whether reach follows the value flow: the command line's choice, else any config's."""
    if options.follow_values is not None:
        return options.follow_values
    return any(settings.follow_values for settings in resolver.all_settings())


def _project(
    summaries: dict[str, ModuleSummary], resolver: ConfigResolver, codes: frozenset[str], follow_values: bool
) -> Project:
    entry_points = frozenset(point for settings in resolver.all_settings() for point in settings.capture_entry_points)
    analysable = {
        path: s for path, s in summaries.items() if s.error is None and s.internal_error is None and not s.skip_file
    }
    return Project(analysable, entry_points, codes, follow_values)


def load_project(
    paths: list[str], resolver: ConfigResolver, options: CheckOptions, notebooks: dict[str, Notebook] | None = None
) -> tuple[list[SourceFile], Project]:
    """The project phase's input without running the rules (for `graphlint captures`); the
    notebooks read go into ``notebooks``, for a report that shows their cells."""
    files = discover(paths, resolver)
    follow = follows_values(resolver, options)
    no_rules: frozenset[str] = frozenset({VALUE_FACTS} if follow else ())
    sources, keys, errors = _read_all(files, no_rules, notebooks=notebooks)
    cache = SummaryCache(options.cache_dir)
    summaries = summarize_files(files, sources, keys, errors, cache, options.jobs, no_rules)
    return files, _project(summaries, resolver, no_rules, follow)


def _parse_errors(files: list[SourceFile], summaries: dict[str, ModuleSummary]) -> list[Finding]:
    found = []
    for source in files:
        summary = summaries[source.display]
        if summary.error is not None and not summary.skip_file:
            line, column = summary.error_line, summary.error_column
            found.append(_core_finding(PARSE_ERROR, summary.error, source.display, line, column))
    return found


def _internal_errors(
    files: list[SourceFile], summaries: dict[str, ModuleSummary], project: Project
) -> tuple[list[Finding], dict[tuple[str, int, str], str]]:
    """GL002 findings (never deselected or suppressed: they say graphlint failed) and tracebacks."""
    found: list[Finding] = []
    tracebacks: dict[tuple[str, int, str], str] = {}
    failures = [
        (s.display, 1, summaries[s.display].internal_error, summaries[s.display].internal_traceback) for s in files
    ]
    failures += [(e.path, e.line, e.message, e.traceback) for e in project.internal_errors]
    for path, line, message, trace in failures:
        if message is None:
            continue
        message = f"{message} (please report this; --verbose shows the traceback)"
        if (path, line, message) not in tracebacks:
            tracebacks[(path, line, message)] = trace or ""
            found.append(_core_finding(INTERNAL_ERROR, message, path, line, 1))
    return found, tracebacks


def _core_finding(rule, message: str, path: str, line: int, column: int) -> Finding:
    return Finding.of(rule, message, path, (line, column, line, column))


def _filter(
    raw: list[Finding], files: list[SourceFile], summaries: dict[str, ModuleSummary], selection: Selection
) -> list[Finding]:
    """Apply per-file selection and suppressions; report suppressions that suppress nothing."""
    by_path: dict[str, list[Finding]] = {}
    for finding in raw:
        by_path.setdefault(finding.path, []).append(finding)
    kept: list[Finding] = []
    for source in files:
        summary = summaries[source.display]
        if summary.skip_file:
            continue
        enabled = enabled_codes(source.settings, selection, relative_to_root(source.path, source.settings))
        preview = source.settings.preview if selection.preview is None else selection.preview
        used: dict[int, set[str]] = {}
        used_blocks: set[SuppressedBlock] = set()
        for finding in by_path.get(source.display, []):
            if finding.code not in enabled:
                continue
            suppression = summary.suppressions.get(finding.line)
            if suppression is not None and suppression.covers(finding.code):
                used.setdefault(finding.line, set()).add(finding.code)
                continue
            block = next((b for b in summary.suppressed_blocks if b.covers(finding.line, finding.code)), None)
            if block is not None:
                used_blocks.add(block)
                continue
            if finding.preview and not preview:
                continue  # after the suppressions: one written in preview mode is not unused without it
            kept.append(finding)
        if UNUSED_SUPPRESSION.code in enabled:
            kept.extend(_unused_suppressions(source.display, summary, enabled, used))
            kept.extend(_unknown_suppression_codes(source.display, summary))
            kept.extend(_unused_blocks(source.display, summary, enabled, used_blocks))
    return kept


def _unused_blocks(
    path: str, summary: ModuleSummary, enabled: frozenset[str], used: set[SuppressedBlock]
) -> list[Finding]:
    """A `# graphlint: disable[CODE]` block with no finding of CODE in it (GL001), and one
    that names no rule: like a line's suppression, it would hide the next one unnoticed."""
    known = all_rules()
    by_comment: dict[tuple[int, int, int], list[str]] = {}
    unknown: dict[tuple[int, int, int], list[str]] = {}
    for block in summary.suppressed_blocks:
        where = (block.start, block.column, block.end_column)
        if block.code.startswith("GL") and block.code not in known:
            unknown.setdefault(where, []).append(block.code)
        elif block.code in enabled and block not in used:
            by_comment.setdefault(where, []).append(block.code)
    found = []
    for (line, column, end_column), codes in sorted(by_comment.items()):
        message = f"unused suppression for {', '.join(sorted(codes))}: no such finding in this block"
        found.append(Finding.of(UNUSED_SUPPRESSION, message, path, (line, column, line, end_column)))
    for (line, column, end_column), codes in sorted(unknown.items()):
        message = f"unknown code in suppression: {', '.join(sorted(codes))} (`graphlint rules` lists the codes)"
        found.append(Finding.of(UNUSED_SUPPRESSION, message, path, (line, column, line, end_column)))
    return found


def _unused_suppressions(
    path: str, summary: ModuleSummary, enabled: frozenset[str], used: dict[int, set[str]]
) -> list[Finding]:
    found = []
    for line, suppression in sorted(summary.suppressions.items()):
        if suppression.codes is None:
            continue  # a suppression without codes may serve other tools
        unused = sorted(code for code in suppression.codes if code in enabled and code not in used.get(line, set()))
        if not unused:
            continue
        message = f"unused suppression for {', '.join(unused)}: no such finding on this line"
        finding = _core_finding(UNUSED_SUPPRESSION, message, path, line, suppression.column)
        found.append(dataclasses.replace(finding, end_column=suppression.end_column))
    return found


def _unknown_suppression_codes(path: str, summary: ModuleSummary) -> list[Finding]:
    """`# noqa: GL999` names no rule (a typo, or a code from a newer graphlint): like ruff's
    RUF100 "unknown" case, say so instead of accepting it silently. Other tools' codes are theirs."""
    known = all_rules()
    found = []
    for line, suppression in sorted(summary.suppressions.items()):
        unknown = sorted(code for code in suppression.codes or () if code.startswith("GL") and code not in known)
        if unknown:
            message = f"unknown code in suppression: {', '.join(unknown)} (`graphlint rules` lists the codes)"
            span = (line, suppression.column, line, suppression.end_column)
            found.append(Finding.of(UNUSED_SUPPRESSION, message, path, span))
    return found


def default_jobs() -> int:
    return max(1, os.cpu_count() or 1)
