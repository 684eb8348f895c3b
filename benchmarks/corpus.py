"""The real-code corpus check: graphlint on pinned releases of the frameworks that use CUDA graphs.

Like ruff's ecosystem check, every finding graphlint reports on the corpus must carry a
label written by a person who read the code (benchmarks/corpus/labels.jsonl), so a change
is judged on real code, not only on fixtures. The check fails when

  - a finding has no label (review it, then add the label),
  - a finding labelled `true` disappeared (a rule must not get precise by going quiet),
  - an injected hazard (benchmarks/corpus/injections.toml) that was found is no longer found,
  - graphlint failed internally (GL002), or reported GL000 on a file that parses.

and prints, per package: files, wall time, findings by code, true/false, capture regions
and how many resolve their callable; per rule: precision, and whether the default set is
at or above 90%; recall on injected hazards.

    python benchmarks/corpus.py                       # download (once), check, compare
    python benchmarks/corpus.py --packages vllm,sglang --jobs 2
    python benchmarks/corpus.py --unlabelled new.jsonl   # write label stubs to fill in
    python benchmarks/corpus.py --values --no-injections  # the opt-in value reach's precision

The downloads and unpacked sources live in $GRAPHLINT_CORPUS_CACHE (default
~/.cache/graphlint-corpus), outside the clone, keyed by each file's SHA-256.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent / "corpus"
MANIFEST = HERE / "manifest.toml"
LABELS = HERE / "labels.jsonl"
# What `--follow-values` (the opt-in reach, issue #30) adds to the default check's findings,
# read against the code as those are; `--values` checks against both files.
VALUES_LABELS = HERE / "follow_values_labels.jsonl"
ANY_COLUMN = -1  # a values label read before labels kept the finding's column
INJECTIONS = HERE / "injections.toml"
PRECISION_FLOOR = 0.9


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    file: str
    sha256: str
    paths: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


@dataclass
class Outcome:
    package: Package
    files: int = 0
    seconds: float = 0.0
    findings: list[dict] = field(default_factory=list)
    captures: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


# -- the manifest, downloads and sources -----------------------------------------------------


def load_manifest(path: Path = MANIFEST) -> list[Package]:
    data = tomllib.loads(path.read_text())
    return [Package(p["name"], p["version"], p["file"], p["sha256"], tuple(p["paths"])) for p in data["package"]]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(package: Package, cache: Path) -> Path:
    """The pinned file, downloaded once with pip and checked against its SHA-256."""
    downloads = cache / "downloads"
    target = downloads / package.file
    if target.is_file() and sha256_of(target) == package.sha256:
        return target
    downloads.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(downloads)]
    if package.file.endswith(".tar.gz"):
        command += ["--no-binary", ":all:", "--no-build-isolation"]  # the sdist; never built
    else:
        command += ["--only-binary", ":all:"]
    subprocess.run([*command, f"{package.name}=={package.version}"], check=True)
    if not target.is_file():
        raise SystemExit(f"corpus: pip did not produce {package.file}")
    found = sha256_of(target)
    if found != package.sha256:
        raise SystemExit(f"corpus: {package.file} has SHA-256 {found}, the manifest pins {package.sha256}")
    return target


def unpack(package: Package, archive: Path, cache: Path) -> Path:
    """The release's .py files under cache/src/<name>-<version>-<sha prefix>/ (once)."""
    root = cache / "src" / f"{package.key}-{package.sha256[:12]}"
    done = root / ".unpacked"
    if done.is_file():
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as wheel:
            for name in wheel.namelist():
                if name.endswith(".py") and ".dist-info/" not in name:
                    wheel.extract(name, root)
    else:
        with tarfile.open(archive) as sdist:
            for member in sdist.getmembers():
                parts = member.name.split("/", 1)
                if member.isfile() and member.name.endswith(".py") and len(parts) == 2:
                    member.name = parts[1]  # drop the <name>-<version>/ prefix
                    sdist.extract(member, root, filter="data")
    done.write_text("ok\n")
    return root


# -- running graphlint -----------------------------------------------------------------------


def graphlint(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "graphlint", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def check_package(package: Package, root: Path, jobs: int, cache_dir: Path | None, values: bool = False) -> Outcome:
    """``values``: reach through the value flow too (`--follow-values`), in check and captures."""
    outcome = Outcome(package)
    outcome.files = sum(1 for p in package.paths for _ in (root / p).rglob("*.py"))
    cache_args = ["--no-cache"] if cache_dir is None else ["--cache-dir", str(cache_dir / package.key)]
    cache_args += ["--follow-values" if values else "--no-follow-values"]
    start = time.perf_counter()
    result = graphlint(
        ["check", "--preview", "--format", "json", "--exit-zero", "--jobs", str(jobs), *cache_args, *package.paths],
        root,
    )
    outcome.seconds = time.perf_counter() - start
    if result.returncode not in (0, 2) or not result.stdout.strip():
        outcome.problems.append(f"graphlint check exited {result.returncode}: {result.stderr.strip()[-2000:]}")
        return outcome
    outcome.findings = [{**f, "path": _relative(f["path"])} for f in json.loads(result.stdout)]
    captures = graphlint(["captures", "--format", "json", "--jobs", str(jobs), *cache_args, *package.paths], root)
    if captures.returncode == 0:
        outcome.captures = json.loads(captures.stdout)
    else:
        outcome.problems.append(f"graphlint captures exited {captures.returncode}: {captures.stderr.strip()[-2000:]}")
    outcome.problems += _bad_findings(outcome.findings, root)
    return outcome


def _relative(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _bad_findings(findings: list[dict], root: Path) -> list[str]:
    problems = []
    for finding in findings:
        where = f"{finding['path']}:{finding['line']}"
        if finding["code"] == "GL002":
            problems.append(f"{where}: internal error: {finding['message']}")
        elif finding["code"] == "GL000" and _parses(root / finding["path"]):
            problems.append(f"{where}: GL000 on a file that parses: {finding['message']}")
    return problems


def _parses(path: Path) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return False
    return True


# -- labels ----------------------------------------------------------------------------------


SECOND_READER = HERE / "second_reader.jsonl"
LabelKey = tuple[str, str, int, int, str]  # package, path, line, column, code


def label_key(package: str, finding: dict) -> LabelKey:
    return (package, finding["path"], int(finding["line"]), int(finding["column"]), finding["code"])


def load_labels(path: Path = LABELS, any_column: bool = False) -> dict[LabelKey, dict]:
    """``any_column``: a label without a column matches a finding at any column of its line
    (`VALUES_LABELS` has 30 such, written before labels kept the column)."""
    labels = {}
    if not path.is_file():
        return labels
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        label = json.loads(line)
        if any_column and "column" not in label:
            label = {**label, "column": ANY_COLUMN}
        if label.get("verdict") not in ("true", "false"):
            raise SystemExit(f"{path}:{number}: verdict must be 'true' or 'false', got {label.get('verdict')!r}")
        if not label.get("reason"):
            raise SystemExit(f"{path}:{number}: a label needs a reason")
        key = label_key(label["package"], label)
        if key in labels:
            raise SystemExit(f"{path}:{number}: a second label for {key}")
        labels[key] = label
    return labels


def values_labels() -> dict[LabelKey, dict]:
    """The labels of a `--values` run: the default check's and those of what values add; a
    finding labelled in both files is an error (one reading per finding)."""
    labels = load_labels()
    added = load_labels(VALUES_LABELS, any_column=True)
    twice = sorted(set(labels) & set(added))
    if twice:
        raise SystemExit(f"{VALUES_LABELS}: labelled in labels.jsonl too: {twice[0]}")
    return {**labels, **added}


@dataclass
class Comparison:
    unlabelled: list[tuple[str, dict]] = field(default_factory=list)
    lost_true: list[dict] = field(default_factory=list)
    gone_false: list[dict] = field(default_factory=list)
    verdicts: dict[LabelKey, str] = field(default_factory=dict)
    # Findings of a default-set rule's preview behaviour ("preview": true in the report): they
    # count for the behaviour, not for the default set.
    preview: set[LabelKey] = field(default_factory=set)
    preview_mismatch: list[dict] = field(default_factory=list)  # the label says otherwise


def compare(outcomes: list[Outcome], labels: dict) -> Comparison:
    """Which findings lack a label, and which true findings disappeared."""
    result = Comparison()
    seen = set()
    checked = {o.package.name for o in outcomes if not any("exited" in p for p in o.problems)}
    for outcome in outcomes:
        for finding in outcome.findings:
            if finding["code"] in ("GL000", "GL002"):
                continue
            key = label_key(outcome.package.name, finding)
            loose = (*key[:3], ANY_COLUMN, key[4])
            seen.update((key, loose))
            label = labels.get(key) or labels.get(loose)
            if finding.get("preview"):
                result.preview.add(key)
            if label is None:
                result.unlabelled.append((outcome.package.name, finding))
                continue
            result.verdicts[key] = label["verdict"]
            if bool(label.get("preview")) != bool(finding.get("preview")):
                result.preview_mismatch.append(label)
    for key, label in sorted(labels.items()):
        if key[0] in checked and key not in seen:
            (result.lost_true if label["verdict"] == "true" else result.gone_false).append(label)
    return result


def precision_table(verdicts: dict[LabelKey, str], by: int) -> dict[str, tuple[int, int]]:
    """(true, decided) per package (by=0) or per code (by=4)."""
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for key, verdict in verdicts.items():
        row = table[key[by]]
        row[0] += verdict == "true"
        row[1] += 1
    return {name: (row[0], row[1]) for name, row in sorted(table.items())}


def default_set_precision(
    verdicts: dict, preview_codes: set[str], preview_keys: set[LabelKey] | frozenset = frozenset()
) -> tuple[int, int]:
    """(true, decided) over what the default mode reports: no preview rule, no preview behaviour."""
    decided = [v for k, v in verdicts.items() if k[4] not in preview_codes and k not in preview_keys]
    return sum(v == "true" for v in decided), len(decided)


# -- injected hazards ------------------------------------------------------------------------


@dataclass(frozen=True)
class Injection:
    id: str
    package: str
    path: str
    after: str  # the stripped text of the line after which the hazard is inserted (must be unique)
    insert: str
    expect: str
    why: str
    found: bool = False  # found by the last reviewed run: losing it fails the check


def load_injections(path: Path = INJECTIONS) -> list[Injection]:
    if not path.is_file():
        return []
    data = tomllib.loads(path.read_text())
    return [Injection(**item) for item in data.get("injection", [])]


def inject(source: str, injection: Injection) -> tuple[str, int]:
    """``source`` with the hazard inserted after the anchor line; the inserted line's number."""
    lines = source.splitlines(keepends=True)
    matches = [i for i, line in enumerate(lines) if line.strip() == injection.after.strip()]
    if len(matches) != 1:
        raise ValueError(f"{injection.id}: anchor found {len(matches)} times in {injection.path}")
    index = matches[0]
    following = next((line for line in lines[index + 1 :] if line.strip()), lines[index])
    indent = following[: len(following) - len(following.lstrip())]
    if lines[index].rstrip().endswith(":") and len(indent) <= len(lines[index]) - len(lines[index].lstrip()):
        indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())] + "    "
    lines.insert(index + 1, f"{indent}{injection.insert}\n")
    return "".join(lines), index + 2


def run_injections(
    package: Package, root: Path, injections: list[Injection], jobs: int, cache_dir: Path, values: bool = False
) -> dict[str, bool]:
    """Each injected hazard, in its own copy of the release: found where it was put, or not
    (``values``: with `--follow-values`, the opt-in reach).

    The copies share one graphlint cache (summaries are keyed by content), so each run
    re-reads only the file that changed.
    """
    found = {}
    for injection in injections:
        with tempfile.TemporaryDirectory(prefix="graphlint-inject-") as scratch:
            copy = Path(scratch) / "src"
            shutil.copytree(root, copy, copy_function=os.link)
            target = copy / injection.path
            text, line = inject(target.read_text(encoding="utf-8"), injection)
            target.unlink()  # a hard link: write a new file, never into the cache
            target.write_text(text, encoding="utf-8")
            result = graphlint(
                [
                    "check",
                    "--preview",
                    "--no-cache",
                    "--format",
                    "json",
                    "--exit-zero",
                    "--jobs",
                    str(jobs),
                    "--follow-values" if values else "--no-follow-values",
                    *package.paths,
                ],
                copy,
            )
            findings = json.loads(result.stdout or "[]")
            found[injection.id] = any(
                _relative(f["path"]) == injection.path and f["line"] == line and f["code"] == injection.expect
                for f in findings
            )
    return found


# -- bugs fixed between two releases ---------------------------------------------------------

FIXED = HERE / "fixed_between_releases.toml"


@dataclass(frozen=True)
class FixedBug:
    """A CUDA-graph or stream bug a framework fixed between two releases on the index."""

    id: str
    package: str
    before: Package
    after: Package
    path: str
    line: int
    expect: str
    found_before: bool  # graphlint found it in the buggy release at the last reviewed run


def load_fixed(path: Path = FIXED) -> list[FixedBug]:
    if not path.is_file():
        return []
    bugs = []
    for item in tomllib.loads(path.read_text()).get("fixed", []):
        paths = tuple(item["paths"])
        before = Package(item["package"], item["before"], item["before_file"], item["before_sha256"], paths)
        after = Package(item["package"], item["after"], item["after_file"], item["after_sha256"], paths)
        bugs.append(
            FixedBug(
                item["id"],
                item["package"],
                before,
                after,
                item["path"],
                item["line"],
                item["expect"],
                item["found_before"],
            )
        )
    return bugs


def _reports_at(package: Package, root: Path, path: str, line: int, code: str, jobs: int, cache: Path) -> bool:
    cache_dir = str(cache / "graphlint" / package.key)  # keyed by graphlint's source: never stale
    options = ["--preview", "--cache-dir", cache_dir, "--format", "json", "--exit-zero", "--jobs", str(jobs)]
    result = graphlint(["check", *options, *package.paths], root)
    findings = json.loads(result.stdout or "[]")
    return any(_relative(f["path"]) == path and f["line"] == line and f["code"] == code for f in findings)


def run_fixed(bugs: list[FixedBug], cache: Path, jobs: int) -> dict[str, tuple[bool, bool]]:
    """Per bug: (reported in the release with the bug, still reported in the release with the fix)."""
    outcome = {}
    for bug in bugs:
        before = unpack(bug.before, fetch(bug.before, cache), cache)
        after = unpack(bug.after, fetch(bug.after, cache), cache)
        outcome[bug.id] = (
            _reports_at(bug.before, before, bug.path, bug.line, bug.expect, jobs, cache),
            _reports_at(bug.after, after, bug.path, bug.line, bug.expect, jobs, cache),
        )
    return outcome


# -- reporting -------------------------------------------------------------------------------


def reach_row(captures: dict) -> tuple[int, int, int, int]:
    """(regions, regions with a resolved callable, regions whose callables all come from outside, functions reached)."""
    regions = captures.get("regions", [])
    resolved = sum(1 for r in regions if any(c["status"] == "resolved" for c in r["callables"]))
    outside = sum(1 for r in regions if r["callables"] and all(c["status"] == "outside" for c in r["callables"]))
    return len(regions), resolved, outside, captures.get("functions_reached", 0)


def _percent(true: int, decided: int) -> str:
    return f"{100 * true / decided:.0f}%" if decided else "-"


def print_report(outcomes: list[Outcome], comparison: Comparison, preview: set[str], recall: dict[str, bool]) -> None:
    print("\n## Packages\n")
    print("| package | files | seconds | findings by code | true/decided | regions | resolved | outside | reached |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    by_package = precision_table(comparison.verdicts, 0)
    for o in outcomes:
        codes = ", ".join(f"{c} {n}" for c, n in sorted(Counter(f["code"] for f in o.findings).items())) or "none"
        true, decided = by_package.get(o.package.name, (0, 0))
        regions, resolved, outside, reached = reach_row(o.captures)
        print(
            f"| {o.package.key} | {o.files} | {o.seconds:.1f} | {codes} | {true}/{decided} "
            f"| {regions} | {resolved} | {outside} | {reached} |"
        )
    print("\n## Rules\n")
    print("| code | set | true | decided | precision |")
    print("|---|---|---:|---:|---:|")
    behaviour = {k: v for k, v in comparison.verdicts.items() if k in comparison.preview}
    default_mode = {k: v for k, v in comparison.verdicts.items() if k not in comparison.preview}
    rows = [
        (code, "preview" if code in preview else "default", n) for code, n in precision_table(default_mode, 4).items()
    ]
    rows += [(code, "preview behaviour", n) for code, n in precision_table(behaviour, 4).items()]
    for code, where, (true, decided) in sorted(rows):
        print(f"| {code} | {where} | {true} | {decided} | {_percent(true, decided)} |")
    true, decided = default_set_precision(comparison.verdicts, preview, comparison.preview)
    print(f"\nDefault set: {true}/{decided} true ({_percent(true, decided)}).")
    if recall:
        hits = sum(recall.values())
        print(f"Injected hazards found: {hits}/{len(recall)} ({_percent(hits, len(recall))}).")
        for name, hit in sorted(recall.items()):
            print(f"  {'found' if hit else 'MISSED'}  {name}")


def agreement(labels: dict[LabelKey, dict], second: dict[LabelKey, dict]) -> tuple[int, int, int]:
    """How often a second, blind reader agrees with the labels: (same verdict, same cause, read by both)."""
    both = [key for key in second if key in labels]
    verdicts = sum(labels[key]["verdict"] == second[key]["verdict"] for key in both)
    causes = sum(
        labels[key]["verdict"] == second[key]["verdict"]
        and labels[key].get("cause", "") == second[key].get("cause", "")
        for key in both
    )
    return verdicts, causes, len(both)


def preview_codes() -> set[str]:
    from graphlint.registry import all_rules

    return {code for code, rule in all_rules().items() if rule.preview}


def failures(
    outcomes: list[Outcome],
    comparison: Comparison,
    preview: set[str],
    recall: dict[str, bool],
    fixed: dict[str, tuple[bool, bool]] | None = None,
    floor: bool = True,
) -> list[str]:
    """What fails the check; ``floor``: a default-set precision under `PRECISION_FLOOR` too (not
    for `--values`, whose precision is reported: the opt-in reach is not the default set yet)."""
    fixed = fixed or {}
    problems = [f"{o.package.key}: {p}" for o in outcomes for p in o.problems]
    for injection in load_injections():
        if injection.found and recall.get(injection.id) is False:
            problems.append(f"an injected hazard is no longer found: {injection.id} ({injection.expect})")
    for bug in load_fixed():
        seen = fixed.get(bug.id)
        if seen is not None and bug.found_before and not seen[0]:
            problems.append(f"a bug fixed between releases is no longer found: {bug.id} ({bug.expect})")
    for package, finding in comparison.unlabelled:
        problems.append(
            f"unlabelled: {package} {finding['path']}:{finding['line']} {finding['code']} {finding['message'][:120]}"
        )
    for label in comparison.lost_true:
        problems.append(
            f"a true finding disappeared: {label['package']} {label['path']}:{label['line']} {label['code']}"
        )
    for label in comparison.preview_mismatch:
        problems.append(
            f"the label's preview flag is not the finding's (set \"preview\": true exactly on preview-behaviour "
            f"findings): {label['package']} {label['path']}:{label['line']} {label['code']}"
        )
    true, decided = default_set_precision(comparison.verdicts, preview, comparison.preview)
    if floor and decided and true / decided < PRECISION_FLOOR:
        problems.append(f"default-set precision {true}/{decided} is below {PRECISION_FLOOR:.0%}")
    return problems


def write_stubs(path: Path, comparison: Comparison) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for package, finding in comparison.unlabelled:
            stub = {
                "package": package,
                "path": finding["path"],
                "line": finding["line"],
                "column": finding["column"],
                "code": finding["code"],
                **({"preview": True} if finding.get("preview") else {}),
                "message": finding["message"],
                "verdict": None,
                "cause": "",
                "reason": "",
            }
            out.write(json.dumps(stub) + "\n")


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """--cache, --packages and --jobs: where the corpus lies, which of it, how parallel (shared
    with corpus_reach.py)."""
    default_cache = os.environ.get("GRAPHLINT_CORPUS_CACHE") or str(Path.home() / ".cache" / "graphlint-corpus")
    parser.add_argument("--cache", default=default_cache, help="downloads and sources (default: %(default)s)")
    parser.add_argument("--packages", help="comma-separated package names (default: all)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)


def injections_only(args: argparse.Namespace, values: bool) -> int:
    """Recall on the injected hazards alone: what the opt-in value reach finds that names miss."""
    cache = Path(args.cache).expanduser()
    wanted = set(args.packages.split(",")) if args.packages else None
    recall: dict[str, bool] = {}
    for package in load_manifest():
        chosen = [i for i in load_injections() if i.package == package.name]
        if chosen and (wanted is None or package.name in wanted):
            root = unpack(package, fetch(package, cache), cache)
            recall.update(run_injections(package, root, chosen, args.jobs, cache / "graphlint", values))
    print(f"Injected hazards found ({'values' if values else 'names'} followed): {sum(recall.values())}/{len(recall)}.")
    for name, hit in sorted(recall.items()):
        print(f"  {'found ' if hit else 'MISSED'} {name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_arguments(parser)
    parser.add_argument("--warm", action="store_true", help="use graphlint's cache (per package, under --cache)")
    parser.add_argument("--unlabelled", metavar="FILE", help="write a label stub for each unlabelled finding")
    parser.add_argument(
        "--no-injections",
        action="store_true",
        help="skip the recall runs (injected hazards, bugs fixed between releases)",
    )
    parser.add_argument("--json", metavar="FILE", help="write findings, reach and precision as JSON")
    parser.add_argument(
        "--injections-only",
        metavar="MODE",
        choices=("names", "values"),
        help="only the injected hazards' recall, following names (the default check's mode) or values",
    )
    parser.add_argument(
        "--values",
        action="store_true",
        help="reach through the value flow too (--follow-values): checked against labels.jsonl and "
        "follow_values_labels.jsonl, injected hazards found that way; precision reported, no floor",
    )
    args = parser.parse_args(argv)
    if args.injections_only:
        return injections_only(args, args.injections_only == "values")
    cache = Path(args.cache).expanduser()
    wanted = set(args.packages.split(",")) if args.packages else None
    packages = [p for p in load_manifest() if wanted is None or p.name in wanted]
    outcomes, roots = [], {}
    for package in packages:
        roots[package.name] = unpack(package, fetch(package, cache), cache)
        outcomes.append(
            check_package(
                package, roots[package.name], args.jobs, cache / "graphlint" if args.warm else None, args.values
            )
        )
        print(
            f"{package.key}: {outcomes[-1].files} files, {len(outcomes[-1].findings)} findings, {outcomes[-1].seconds:.1f} s",
            flush=True,
        )
    labels = values_labels() if args.values else load_labels()
    comparison = compare(outcomes, labels)
    recall: dict[str, bool] = {}
    if not args.no_injections:
        for package in packages:
            chosen = [i for i in load_injections() if i.package == package.name]
            recall.update(
                run_injections(package, roots[package.name], chosen, args.jobs, cache / "graphlint", args.values)
            )
    fixed: dict[str, tuple[bool, bool]] = {}
    if not args.no_injections and not args.values:
        fixed = run_fixed([b for b in load_fixed() if wanted is None or b.package in wanted], cache, args.jobs)
    preview = preview_codes()
    print_report(outcomes, comparison, preview, recall)
    if fixed:
        hits = sum(before and not after for before, after in fixed.values())
        print(f"Bugs fixed between releases, found before and gone after: {hits}/{len(fixed)}.")
        for name, (before, after) in sorted(fixed.items()):
            print(
                f"  {'found' if before else 'MISSED'} in the release with the bug, {'still reported' if after else 'gone'} after the fix: {name}"
            )
    same, causes, both = agreement(labels, load_labels(SECOND_READER))
    if both:
        print(f"Second reader (blind, {both} findings): same verdict {same}/{both}, same cause {causes}/{both}.")
    if args.unlabelled:
        write_stubs(Path(args.unlabelled), comparison)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "packages": {
                        o.package.key: {
                            "files": o.files,
                            "seconds": o.seconds,
                            "findings": o.findings,
                            "captures": o.captures,
                        }
                        for o in outcomes
                    },
                    "recall": recall,
                    "fixed_between_releases": fixed,
                },
                indent=1,
            )
        )
    if args.values:
        print("\nReach through values (--follow-values): the precision above is the opt-in reach's.")
    problems = failures(outcomes, comparison, preview, recall, fixed, floor=not args.values)
    for problem in problems:
        print(f"FAIL {problem}")
    print(
        f"\ncorpus: {'FAILED' if problems else 'passed'} ({len(problems)} problem{'s' if len(problems) != 1 else ''})"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
