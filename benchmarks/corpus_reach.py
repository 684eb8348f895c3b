"""Reach on the real-code corpus: how much of what each framework captures graphlint follows.

The rules only judge code the engine knows runs inside a capture, so a clean report on a
package means little unless its capture regions resolve what they run. Per package, from
`graphlint captures --format json`:

  regions     capture regions found (CUDA graphs, wrappers, capture_begin/end spans,
              compiled cudagraph and make_graphed_callables entry points)
  inline      regions that call no user callable (only torch operations written inline)
  resolved    regions with at least one callable resolved to a definition in the package
  outside     regions whose callables all come from outside (see below)
  unresolved  the rest: a callable graphlint could not follow and cannot place outside
  in-project  resolved / (resolved + unresolved): the issue's ">= 90%" measure
  reached     distinct functions reached from the package's captures

"Defined in the analysed files" means: the function, method or class whose code the region
runs is defined in one of the files graphlint checked for the package (the manifest's
`paths`, as corpus.py passes them). A callable is *outside* when that code is not there:
  - a name of a library or module not analysed (`torch.nn.attention.flex_attention`, or a
    submodule the wheel leaves out, `torchao._models.llama`);
  - a value every source of which is outside (`capture_origins`): a parameter of a function
    no analysed code calls (a public API: `FullCudaGraphWrapper(forward_backward_func)`,
    built by the training script), an attribute only ever set from such a parameter, an
    attribute of such a value, an object a library call builds from outside values.
A parameter that the analysed code does call, with values graphlint cannot follow, is
unresolved, not outside: its callable may well be defined here. So `in-project` counts
every region whose callable may be in the package, and errs towards unresolved.
`--regions` lists each region that is not resolved, with its expressions and why.

    python benchmarks/corpus_reach.py [--packages sglang,vllm] [--jobs 2] [--json reach.json] [--regions]
    python benchmarks/corpus_reach.py --sample 30 --seed 16 --sample-out sample.jsonl
    python benchmarks/corpus_reach.py --check-sample   # CI: every checked reading still holds

benchmarks/corpus/reach_sample.jsonl is the hand check of what the report says: 30 resolutions
drawn with `--sample 30 --seed 16` (helper-16b), then the resolutions the value flow added and
the outside placements of `capture_origins` (`status` "outside"), each read against the code
(`verdict` correct or incorrect, `reason` with the lines that decide it).

Which graphlint runs is the one `python -m graphlint` imports: to measure another checkout,
run this script from outside it with PYTHONPATH pointing at that checkout. The sources come
from benchmarks/corpus.py's cache (run it once to download them).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus

COLUMNS = ("regions", "inline", "resolved", "outside", "unresolved", "in-project", "reached", "seconds")


def region_status(region: dict) -> str:
    """One word for a region: what the best-followed of its callables reached."""
    statuses = {c["status"] for c in region["callables"]}
    if not statuses:
        return "inline"
    if "resolved" in statuses:
        return "resolved"
    return "outside" if statuses == {"outside"} else "unresolved"


def reach(captures: dict) -> dict[str, int | str]:
    """The table row of one package's `graphlint captures` report."""
    row: dict[str, int | str] = {name: 0 for name in ("regions", "inline", "resolved", "outside", "unresolved")}
    for region in captures.get("regions", []):
        row["regions"] += 1  # type: ignore[operator]
        row[region_status(region)] += 1  # type: ignore[operator]
    followable = int(row["resolved"]) + int(row["unresolved"])
    row["in-project"] = f"{100 * int(row['resolved']) / followable:.0f}%" if followable else "-"
    row["reached"] = captures.get("functions_reached", 0)
    return row


def run_package(
    package: corpus.Package, root: Path, jobs: int, cache: Path | None, follow_values: bool = True
) -> tuple[dict, float]:
    cache_args = ["--no-cache"] if cache is None else ["--cache-dir", str(cache / package.key)]
    values = "--follow-values" if follow_values else "--no-follow-values"
    start = time.perf_counter()
    result = corpus.graphlint(
        ["captures", "--format", "json", values, "--jobs", str(jobs), *cache_args, *package.paths], root
    )
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{package.key}: graphlint captures exited {result.returncode}: {result.stderr[-2000:]}")
    return json.loads(result.stdout), seconds


def resolutions(reports: dict[str, dict]) -> list[dict]:
    """Every (region, resolved callable) pair, for drawing a sample to check by hand."""
    found = []
    for package, report in sorted(reports.items()):
        for region in report.get("regions", []):
            for callable_ in region["callables"]:
                if callable_["status"] == "resolved":
                    where = f"{region['path']}:{region['line']}"
                    found.append(
                        {
                            "package": package,
                            "region": where,
                            "kind": region["kind"],
                            "label": region["label"],
                            "expression": callable_["expression"],
                            "resolved": callable_["targets"],
                        }
                    )
    return found


def print_regions(reports: dict[str, dict]) -> None:
    """Each region that is not resolved: its status, and each callable's expression and why."""
    for package, report in reports.items():
        for region in report.get("regions", []):
            status = region_status(region)
            if status in ("resolved", "inline"):
                continue
            print(f"[{status}] {package} {region['path']}:{region['line']} {region['kind']}: {region['label']}")
            for callable_ in region["callables"]:
                print(f"    {callable_['status']}: `{callable_['expression']}` ({callable_['detail']})")


SAMPLE = corpus.HERE / "reach_sample.jsonl"


def stale_readings(reports: dict[str, dict], sample: Path = SAMPLE) -> list[str]:
    """The entries of the hand-checked sample whose region, status or targets the report no
    longer gives as read: a reading that no longer describes what graphlint says must be read
    again (a wrong resolution must not drift in under a stale "correct")."""
    found: dict[tuple[str, str, str], dict] = {}
    for package, report in reports.items():
        for region in report.get("regions", []):
            for callable_ in region["callables"]:
                found[(package, f"{region['path']}:{region['line']}", callable_["expression"])] = callable_
    stale = []
    for line in sample.read_text().splitlines():
        entry = json.loads(line)
        if entry["package"] not in reports:
            continue
        key = (entry["package"], entry["region"], entry["expression"])
        now = found.get(key)
        status = entry.get("status", "resolved")
        if now is None:
            stale.append(f"{' '.join(key)}: no such callable in the report")
        elif now["status"] != status or (status == "resolved" and sorted(now["targets"]) != sorted(entry["resolved"])):
            stale.append(
                f"{' '.join(key)}: read as {status} {sorted(entry['resolved'])}, now {now['status']} {sorted(now['targets'])}"
            )
    return stale


def print_table(rows: dict[str, dict]) -> None:
    print("| package | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    for package, row in rows.items():
        print(f"| {package} | " + " | ".join(str(row[c]) for c in COLUMNS) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus.add_source_arguments(parser)
    parser.add_argument("--cold", action="store_true", help="no graphlint cache (default: warm, per package)")
    parser.add_argument("--json", metavar="FILE", help="write the rows and every capture report as JSON")
    parser.add_argument("--regions", action="store_true", help="list every region not resolved, and why")
    parser.add_argument(
        "--follow-values",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="reach through the value flow (default; --no-follow-values: what `graphlint check` follows by default)",
    )
    parser.add_argument("--sample", type=int, default=0, help="draw this many resolutions to check by hand")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--sample-out", metavar="FILE", help="where the sample goes (JSON lines; default stdout)")
    parser.add_argument(
        "--check-sample", action="store_true", help=f"fail when an entry of {SAMPLE.name} no longer matches the report"
    )
    args = parser.parse_args(argv)
    cache = Path(args.cache).expanduser()
    wanted = set(args.packages.split(",")) if args.packages else None
    rows: dict[str, dict] = {}
    reports: dict[str, dict] = {}
    for package in corpus.load_manifest():
        if wanted is not None and package.name not in wanted:
            continue
        root = corpus.unpack(package, corpus.fetch(package, cache), cache)
        report, seconds = run_package(
            package, root, args.jobs, None if args.cold else cache / "graphlint", args.follow_values
        )
        reports[package.key] = report
        rows[package.key] = {**reach(report), "seconds": f"{seconds:.1f}"}
        print(f"{package.key}: {rows[package.key]}", file=sys.stderr, flush=True)
    print_table(rows)
    if args.regions:
        print_regions(reports)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "reports": reports}, indent=1))
    if args.sample:
        pairs = resolutions(reports)
        chosen = random.Random(args.seed).sample(pairs, min(args.sample, len(pairs)))
        lines = "".join(json.dumps({**pair, "verdict": "", "reason": ""}) + "\n" for pair in chosen)
        if args.sample_out:
            Path(args.sample_out).write_text(lines)
        else:
            sys.stdout.write(lines)
    if args.check_sample:
        stale = stale_readings(reports)
        for problem in stale:
            print(f"STALE {problem}")
        print(
            f"reach sample: {'FAILED' if stale else 'passed'} ({len(stale)} stale of {len(SAMPLE.read_text().splitlines())})"
        )
        return 1 if stale else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
