"""Recall on real history: graphlint on the parent and the fix of public bug-fix commits.

Each pair in benchmarks/recall/bugfix_pairs.toml is a commit whose parent had a CUDA-graph or
stream hazard that graphlint's rules describe, and that the commit removed. The pair is checked
as a user checks a project: the whole top-level package (`megatron/`, `deepspeed/`, ...) is
exported at the parent and at the fix, and `graphlint check` runs on it in several modes:

  default   the default rule set, names followed (what `graphlint check` does)
  preview   --preview
  values    --follow-values
  widest    --preview --follow-values

A pair is *caught* in a mode when, at the parent, that mode reports one of the pair's codes in
the pair's file, and reports fewer of them there at the fix. `at hazard` says whether one of
those findings is on the hazard's own lines (or in the function around them).

For a pair the default mode misses, the benchmark says why, in one class:

  preview      a preview rule catches it (the rule is right but not yet in the default set)
  reach        it is caught only when the value flow is followed
  not-reached  (capture codes, GL1xx) the hazard's function is in no capture's reach, even with
               values followed (no function of the file, where the pair names no line): the
               rule never looks there
  deaf         the code is looked at (reached, or any function for the stream and replay
               rules and for the rules that judge the capture statement itself, GL107, GL108
               and GL113, which look at every function) and no mode's rule hears the pattern
  no-rule, runtime, outside, no-capture-at-parent
               no static check can catch it, judged by reading the diff and the package (the
               pair's `miss`, with its `miss_reading`): no rule describes the hazard; only the
               runtime sanitizer sees it; the capture that runs it is outside the checked
               package; the parent as written runs the code under no capture
  fix-not-less the parent is flagged, the fix is not flagged less

    python benchmarks/bugfix_pairs.py --mirrors /work/.mirror
    python benchmarks/bugfix_pairs.py --mirrors DIR --only Megatron --modes default,widest
    python benchmarks/bugfix_pairs.py --mirrors DIR --results benchmarks/results

A mirror is a git repository of the pair's project (bare or not) at DIR/OWNER+NAME/repo,
DIR/OWNER+NAME or DIR/NAME: any clone that holds both commits. CI has no git history, so CI
runs the fixtures written from these patterns; this benchmark runs where the mirrors are.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PAIRS = Path(__file__).resolve().parent / "recall" / "bugfix_pairs.toml"
MODES: dict[str, tuple[str, ...]] = {
    "default": (),
    "preview": ("--preview",),
    "values": ("--follow-values",),
    "widest": ("--preview", "--follow-values"),
}
STREAM_PREFIX = "GL3"
CAPTURE_PREFIX = "GL1"  # the rules that look only at code a capture reaches
# ... except those that judge the capture statement itself (its warm-up, its autocast, the
# hooks on what it graphs): no callee needs reaching for them.
CAPTURE_SITE_CODES = frozenset({"GL107", "GL108", "GL113"})
# The reasons no static check can catch a pair, judged by reading its diff (a pair's `miss`).
MISS_CLASSES = {
    "no-rule": "no graphlint rule describes the hazard",
    "runtime": "only the runtime sanitizer sees it (the pair's miss_reading names the code)",
    "outside": "the capture that runs the hazard is outside the checked package",
    "no-capture-at-parent": "the parent, as written, runs the code under no capture",
}


@dataclass(frozen=True)
class Pair:
    repo: str
    fix: str
    file: str
    codes: tuple[str, ...]
    hazard: str
    lines: tuple[int, ...] = ()
    package: str = ""  # the folder checked, relative to the repository root ("" for the root)
    origin: str = "shared"  # shared | mined
    miss: str = ""  # the judged reason no static check can catch it (MISS_CLASSES), else ""
    miss_reading: str = ""  # the reading behind `miss`, in a sentence
    needs: str = ""  # what a rule must see to catch it, from reading the diff
    verdict: str = ""  # the reading of the diff: right | partly | wrong ("" not read yet)

    @property
    def key(self) -> str:
        return f"{self.repo.split('/')[1]}@{self.fix[:10]}"

    @property
    def checked(self) -> str:
        """The top-level package: the pair's own `package`, else the file's first folder."""
        if self.package:
            return self.package.strip("/")
        head, _, rest = self.file.partition("/")
        return head if rest else ""

    @property
    def stream(self) -> bool:
        return all(code.startswith(STREAM_PREFIX) for code in self.codes)


@dataclass
class ModeResult:
    parent: list[dict] = field(default_factory=list)  # the pair's codes in its file, at the parent
    fix: list[dict] = field(default_factory=list)  # the same at the fix
    others: Counter = field(default_factory=Counter)  # other codes in the file, at the parent
    seconds: float = 0.0
    error: str = ""

    @property
    def caught(self) -> bool:
        return bool(self.parent) and len(self.fix) < len(self.parent)

    def at(self, span: tuple[int, int] | None) -> bool:
        return span is not None and any(span[0] <= f["line"] <= span[1] for f in self.parent)

    def to_dict(self, span: tuple[int, int] | None) -> dict:
        return {
            "caught": self.caught,
            "at_hazard": self.at(span),
            "parent": [_brief(f) for f in self.parent],
            "fix": [_brief(f) for f in self.fix],
            "other_codes_in_file": dict(self.others),
            "seconds": round(self.seconds, 1),
            "error": self.error,
        }


def _brief(finding: dict) -> dict:
    return {"code": finding["code"], "line": finding["line"], "message": finding["message"]}


def load_pairs(path: Path = PAIRS) -> list[Pair]:
    data = tomllib.loads(path.read_text())
    pairs = []
    for row in data["pair"]:
        pairs.append(
            Pair(
                repo=row["repo"],
                fix=row["fix"],
                file=row["file"],
                codes=tuple(row["codes"]),
                hazard=row["hazard"],
                lines=tuple(row.get("lines", ())),
                package=row.get("package", ""),
                origin=row.get("origin", "shared"),
                miss=row.get("miss", ""),
                miss_reading=row.get("miss_reading", ""),
                needs=row.get("needs", ""),
                verdict=row.get("verdict", ""),
            )
        )
    return pairs


# -- mirrors and exports ----------------------------------------------------------------------


def mirror_of(repo: str, mirrors: Path) -> Path:
    owner, name = repo.split("/")
    for candidate in (mirrors / f"{owner}+{name}" / "repo", mirrors / f"{owner}+{name}", mirrors / name):
        if candidate.is_dir():
            return candidate
    raise LookupError(f"no mirror of {repo} under {mirrors} (looked for {owner}+{name}/repo, {owner}+{name}, {name})")


def git(mirror: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={_git_dir(mirror)}", *args], check=True, capture_output=True).stdout


def _git_dir(mirror: Path) -> Path:
    return mirror / ".git" if (mirror / ".git").exists() else mirror


def export(mirror: Path, commit: str, package: str, into: Path) -> None:
    """The package's Python files (and config files graphlint reads) at `commit`, under `into`."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", f"--git-dir={_git_dir(mirror)}", "archive", "--format=tar", commit, "--", package or "."],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        kept = [m for m in tar.getmembers() if m.isfile() and m.name.endswith((".py", "/pyproject.toml"))]
        tar.extractall(into, members=kept, filter="data")


def hazard_span(source: str, lines: tuple[int, ...]) -> tuple[int, int] | None:
    """The innermost function around the hazard's first line, else the lines themselves."""
    if not lines:
        return None
    line = lines[0]
    best: tuple[int, int] | None = None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return (min(lines), max(lines))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end and (best is None or node.lineno >= best[0]):
                best = (node.lineno, end)
    return best or (min(lines), max(lines))


# -- running graphlint -------------------------------------------------------------------------


def run_check(root: Path, package: str, flags: tuple[str, ...], jobs: int, cache: Path) -> tuple[list[dict], float]:
    command = [sys.executable, "-m", "graphlint", "check", package or ".", "--format", "json", "--exit-zero"]
    command += ["--jobs", str(jobs), "--cache-dir", str(cache), *flags]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, env=_env())
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"graphlint exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout), seconds


def _env() -> dict[str, str]:
    """graphlint from this checkout, whatever is installed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    return env


def reached_functions(root: Path, package: str, follow_values: bool, jobs: int, cache: Path) -> list[list]:
    """[path, def line, qualname] of every function some capture reaches (a child process)."""
    command = [sys.executable, __file__, "--reach-probe", str(root), package or "."]
    command += ["--jobs", str(jobs), "--cache", str(cache)] + (["--follow-values"] if follow_values else [])
    done = subprocess.run(command, capture_output=True, text=True, env=_env())
    if done.returncode != 0:
        raise RuntimeError(f"the reach probe exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def reach_probe(root: str, package: str, follow_values: bool, jobs: int, cache: str) -> None:
    """Print the reach of the project at root/package as JSON (runs in its own process)."""
    sys.path.insert(0, str(ROOT))
    from graphlint.config import ConfigResolver
    from graphlint.engine import CheckOptions, load_project

    os.chdir(root)
    options = CheckOptions(jobs=jobs, cache_dir=Path(cache), follow_values=follow_values)
    _, project = load_project([package], ConfigResolver(None), options)
    found = []
    for qualname in project.capture_reach():
        located = project.functions.get(qualname)
        if located is not None:
            path, function = located
            found.append([path, function.line, qualname])
    print(json.dumps(found))


# -- one pair ----------------------------------------------------------------------------------


def in_file(findings: list[dict], pair: Pair) -> tuple[list[dict], Counter]:
    here = [f for f in findings if f["path"] == pair.file]
    named = [f for f in here if f["code"] in pair.codes]
    return named, Counter(f["code"] for f in here if f["code"] not in pair.codes)


def measure(pair: Pair, mirrors: Path, work: Path, modes: list[str], jobs: int) -> dict:
    mirror = mirror_of(pair.repo, mirrors)
    base = work / pair.key
    roots = {"parent": base / "parent", "fix": base / "fix"}
    export(mirror, f"{pair.fix}^", pair.checked, roots["parent"])
    export(mirror, pair.fix, pair.checked, roots["fix"])
    parent_source = git(mirror, "show", f"{pair.fix}^:{pair.file}").decode("utf-8", "replace")
    span = hazard_span(parent_source, pair.lines)
    cache = work / "cache" / pair.repo.replace("/", "+")
    results: dict[str, ModeResult] = {}
    for mode in modes:
        result = ModeResult()
        try:
            at_parent, seconds = run_check(roots["parent"], pair.checked, MODES[mode], jobs, cache)
            at_fix, more = run_check(roots["fix"], pair.checked, MODES[mode], jobs, cache)
            result.parent, result.others = in_file(at_parent, pair)
            result.fix, _ = in_file(at_fix, pair)
            result.seconds = seconds + more
        except (RuntimeError, json.JSONDecodeError) as error:
            result.error = str(error)
        results[mode] = result
    reason = miss_reason(pair, results, span, roots["parent"], jobs, cache)
    return {
        "key": pair.key,
        "repo": pair.repo,
        "fix": pair.fix,
        "file": pair.file,
        "codes": list(pair.codes),
        "hazard": pair.hazard,
        "origin": pair.origin,
        "verdict": pair.verdict,
        "hazard_span": list(span) if span else None,
        "modes": {mode: r.to_dict(span) for mode, r in results.items()},
        "reason": reason,
        "miss_reading": pair.miss_reading,
    }


def miss_reason(
    pair: Pair, results: dict[str, ModeResult], span: tuple[int, int] | None, parent: Path, jobs: int, cache: Path
) -> str:
    """Why the default mode misses the pair ("" when it catches it)."""
    default = results.get("default")
    if default is not None and default.caught:
        return ""
    if default is not None and default.parent:
        return "fix-not-less"
    if _caught(results, "preview"):
        return "preview"
    if _caught(results, "values"):
        return "reach"
    if _caught(results, "widest"):
        return "preview+reach"
    if pair.miss:
        return pair.miss
    if not any(code.startswith(CAPTURE_PREFIX) and code not in CAPTURE_SITE_CODES for code in pair.codes):
        return "deaf"  # stream, replay and capture-site rules look at every function: nothing to reach
    try:
        reached = reached_functions(parent, pair.checked, True, jobs, cache)
    except RuntimeError as error:
        print(f"{pair.key}: {error}", file=sys.stderr)
        return "unknown (the reach probe failed)"
    inside = any(path == pair.file and (span is None or span[0] <= line <= span[1]) for path, line, _ in reached)
    return "deaf" if inside else "not-reached"


def _caught(results: dict[str, ModeResult], mode: str) -> bool:
    return mode in results and results[mode].caught


# -- the report --------------------------------------------------------------------------------


def print_table(rows: list[dict], modes: list[str]) -> None:
    head = f"{'pair':<28} {'codes':<22} " + " ".join(f"{m:<9}" for m in modes) + " reason"
    print(head)
    print("-" * len(head))
    for row in rows:
        cells = [_cell(row["modes"].get(mode)) for mode in modes]
        print(
            f"{row['key']:<28} {','.join(row['codes']):<22} " + " ".join(f"{c:<9}" for c in cells) + f" {row['reason']}"
        )
    print()
    streams = [r for r in rows if all(c.startswith(STREAM_PREFIX) for c in r["codes"])]
    for mode in modes:
        caught = _count_caught(rows, mode)
        caught_streams = _count_caught(streams, mode)
        print(
            f"{mode:<8} caught {caught}/{len(rows)}"
            f"  (stream {caught_streams}/{len(streams)}, capture and replay "
            f"{caught - caught_streams}/{len(rows) - len(streams)})"
        )
    wrong = [r for r in rows if r.get("verdict") == "wrong"]
    if wrong:
        print(f"({len(wrong)} pair(s) read as wrong, counted above: {', '.join(r['key'] for r in wrong)})")
    reasons = Counter(r["reason"] for r in rows if r["reason"])
    if reasons:
        print("default-mode misses: " + ", ".join(f"{k} {v}" for k, v in reasons.most_common()))


def _count_caught(rows: list[dict], mode: str) -> int:
    """How many of ``rows`` ``mode`` caught (a row not run in that mode is not caught)."""
    return sum(1 for r in rows if r["modes"].get(mode, {}).get("caught"))


def _cell(result: dict | None) -> str:
    if result is None:
        return "-"
    if result["error"]:
        return "ERROR"
    mark = "CAUGHT" if result["caught"] else "missed"
    return f"{mark}{'*' if result['at_hazard'] else ''}"


def print_findings(rows: list[dict]) -> None:
    for row in rows:
        for mode, result in row["modes"].items():
            if result["error"]:
                print(f"{row['key']} [{mode}] error: {result['error']}")
            for side, label in (("parent", "parent"), ("fix", "fix   ")):
                for finding in result[side]:
                    where = f"{row['file']}:{finding['line']}"
                    print(f"{row['key']} [{mode}] {label} {where}: {finding['code']} {finding['message']}")


def markdown(rows: list[dict], modes: list[str], measured: str) -> str:
    lines = [
        f"# Recall on real bug-fix pairs ({date.today().isoformat()}, graphlint {measured})",
        "",
        "`python benchmarks/bugfix_pairs.py --mirrors DIR --results benchmarks/results`. "
        "CAUGHT: a named code in the named file at the parent, fewer at the fix; * one of them on the "
        "hazard's function. reason: why the default mode misses it.",
        "",
        "| pair | file | codes | read | " + " | ".join(modes) + " | reason |",
        "|---|---|---|---|" + "---|" * len(modes) + "---|",
    ]
    for row in rows:
        cells = " | ".join(_cell(row["modes"].get(mode)) for mode in modes)
        read = row.get("verdict", "")
        lines.append(
            f"| {row['key']} | {row['file']} | {','.join(row['codes'])} | {read} | {cells} | {row['reason']} |"
        )
    lines.append("")
    for mode in modes:
        lines.append(f"- {mode}: {_count_caught(rows, mode)}/{len(rows)} caught")
    judged = [row for row in rows if row["reason"] in MISS_CLASSES and row.get("miss_reading")]
    if judged:
        lines += ["", "Misses no static check can catch, from reading each diff and its package:", ""]
        lines += [f"- {row['key']} ({row['reason']}): {row['miss_reading']}" for row in judged]
    return "\n".join(lines) + "\n"


def measured_commit(root: Path = ROOT) -> str:
    """The graphlint commit measured (`+dirty` with local changes), or "unknown" outside git
    (a copy of the tree, an sdist), so the results' file name always names something."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "graphlint"], capture_output=True)
    except OSError:
        return "unknown"
    if head.returncode != 0 or not head.stdout.strip():
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", metavar="DIR", help="where the git mirrors are (default $GRAPHLINT_MIRRORS)")
    parser.add_argument("--pairs", default=str(PAIRS), metavar="FILE")
    parser.add_argument("--only", metavar="TEXT", help="pairs whose repo, fix or file contains TEXT (comma-separated)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, of: " + ", ".join(MODES))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--work", metavar="DIR", help="exports and graphlint's caches (default: a temporary folder)")
    parser.add_argument("--results", metavar="DIR", help="write bugfix_pairs-DATE-COMMIT.json and .md there")
    parser.add_argument("--findings", action="store_true", help="list every finding in the pairs' files")
    parser.add_argument("--reach-probe", nargs=2, metavar=("ROOT", "PACKAGE"), help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--follow-values", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reach_probe:
        reach_probe(*args.reach_probe, args.follow_values, args.jobs, args.cache)
        return 0
    mirrors = args.mirrors or os.environ.get("GRAPHLINT_MIRRORS")
    if not mirrors:
        parser.error("--mirrors DIR (or $GRAPHLINT_MIRRORS) is required")
    modes = args.modes.split(",")
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    pairs = load_pairs(Path(args.pairs))
    if args.only:
        wanted = args.only.split(",")
        pairs = [p for p in pairs if any(w in f"{p.repo} {p.fix} {p.file}" for w in wanted)]
    with tempfile.TemporaryDirectory(prefix="bugfix-pairs-") as scratch:
        work = Path(args.work or scratch)
        rows = []
        for pair in pairs:
            started = time.perf_counter()
            row = measure(pair, Path(mirrors), work, modes, args.jobs)
            rows.append(row)
            print(f"{pair.key}: {_summary(row, modes)} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    if args.findings:
        print_findings(rows)
    print_table(rows, modes)
    if args.results:
        measured = measured_commit()
        Path(args.results).mkdir(parents=True, exist_ok=True)  # a half-hour run must not die on a missing folder
        stem = Path(args.results) / f"bugfix_pairs-{date.today().isoformat()}-{measured}"
        Path(f"{stem}.json").write_text(json.dumps({"graphlint": measured, "modes": modes, "pairs": rows}, indent=1))
        Path(f"{stem}.md").write_text(markdown(rows, modes, measured))
        print(f"wrote {stem}.json and .md", file=sys.stderr)
    return 0


def _summary(row: dict, modes: list[str]) -> str:
    return " ".join(f"{m}={_cell(row['modes'].get(m))}" for m in modes) + (
        f" [{row['reason']}]" if row["reason"] else ""
    )


if __name__ == "__main__":
    raise SystemExit(main())
