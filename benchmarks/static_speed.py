"""Static checker speed on the CPU torch wheel's own sources, as ratios to libcst's bare parse.

Runs, in one process and one session (machines here are noisy, so only ratios measured
side by side mean anything):
  - the parse floor: libcst.parse_module over every file, one process;
  - the stdlib ast parse of the same files (graphlint's own parser), for reference;
  - graphlint cold --jobs 1, cold --jobs 2, warm (cache, nothing changed), one file changed.
Prints a table and writes JSON (--json FILE).

    python benchmarks/static_speed.py [--wheel PATH] [--subset torch/distributed] [--json out.json]
    python benchmarks/static_speed.py --corpus sglang,vllm   # real-code corpus sources instead

--corpus times the sources of benchmarks/corpus.py's packages (its cache; run it once to
download them) the same way: real frameworks, whose captures and cross-file reach cost
more than the torch tree's. The graphlint timed is the one `python -m graphlint` imports
from the current directory and PYTHONPATH: run from outside a checkout to time another.

    python benchmarks/static_speed.py --baseline ../old-tree [--rounds 3] [--follow-values]

--baseline compares two trees of graphlint on a box too noisy for one run of each: each
round times the parse floor, then a cold --jobs 1 run of the baseline tree and of this one,
back to back, and the table gives each round's ratios and their medians, so a change is
judged against a baseline measured minutes, not sessions, apart. With --follow-values both
trees' runs follow values.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import glob
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from pathlib import Path

DEFAULT_WHEEL = "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


def unpack(wheel: str, target: Path) -> Path:
    if not (target / "torch").is_dir():
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.startswith("torch/") and name.endswith(".py"):
                    archive.extract(name, target)
    return target / "torch"


def timed(fn) -> tuple[float, float]:
    """Wall and CPU seconds of fn() in this process."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def children_cpu() -> float:
    """CPU seconds used so far by finished child processes: on a shared machine the
    wall time of a run depends on its neighbours, its CPU time much less."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def parse_floor(files: list[str]) -> None:
    import libcst

    for path in files:
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        with contextlib.suppress(Exception):
            libcst.parse_module(source)


def ast_floor(files: list[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in files:
            with open(path, "rb") as handle:
                data = handle.read()
            with contextlib.suppress(SyntaxError):
                ast.parse(data)


def torch_tree(wheel: str, workdir: str, subset: str) -> Path:
    return unpack(wheel, Path(workdir)).parent / subset


def corpus_trees(names: str) -> list[Path]:
    """The checked folders of the named corpus packages (benchmarks/corpus/manifest.toml)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import corpus  # the manifest and the unpacked sources of the corpus check

    cache = Path(os.environ.get("GRAPHLINT_CORPUS_CACHE") or Path.home() / ".cache" / "graphlint-corpus")
    wanted = set(names.split(","))
    packages = [p for p in corpus.load_manifest() if p.name in wanted or "all" in wanted]
    if not packages:
        raise SystemExit(f"--corpus: no package named {names!r} in the corpus manifest")
    trees = []
    for package in packages:
        root = cache / "src" / f"{package.key}-{package.sha256[:12]}"
        if not (root / ".unpacked").is_file():  # download only what is not unpacked yet
            root = corpus.unpack(package, corpus.fetch(package, cache), cache)
        trees += [root / path for path in package.paths]
    return trees


def graphlint(
    trees: list[Path], cache: Path, jobs: int, output: Path, *extra: str, source: Path | None = None
) -> tuple[float, float]:
    """Wall and CPU seconds of one `graphlint check` run (``source``: the graphlint tree to
    import, run from outside any checkout; by default the one this process would import)."""
    command = [
        sys.executable,
        "-m",
        "graphlint",
        "check",
        *map(str, trees),
        "--exit-zero",
        "--format",
        "json",
        "--output-file",
        str(output),
        "--jobs",
        str(jobs),
        "--config",
        str(cache.parent / "neutral.toml"),  # no project excludes: every file is checked
        "--cache-dir",
        str(cache),
        *extra,
    ]
    env, cwd = None, None
    if source is not None:
        env, cwd = dict(os.environ, PYTHONPATH=str(source)), str(cache.parent)
    start, cpu = time.perf_counter(), children_cpu()
    subprocess.run(command, check=True, env=env, cwd=cwd)
    return time.perf_counter() - start, children_cpu() - cpu


def compare(trees: list[Path], files: list[str], baseline: Path, rounds: int, *extra: str) -> dict:
    """Per round: the parse floor, then cold --jobs 1 of the baseline tree and of this one
    (``extra``: options both runs take, `--follow-values` to compare that mode)."""
    here = Path(__file__).resolve().parent.parent
    table: dict[str, list[float]] = {"floor": [], "baseline": [], "this": []}
    cache = Path(tempfile.mkdtemp(prefix="graphlint-bench-cache-"))
    try:
        (cache / "neutral.toml").write_text("")
        for index in range(rounds):
            table["floor"].append(timed(lambda: parse_floor(files))[0])
            for name, source in (("baseline", baseline.resolve()), ("this", here)):
                output = cache / f"{name}{index}.json"
                table[name].append(graphlint(trees, cache / f"{name}{index}", 1, output, *extra, source=source)[0])
            print(
                f"round {index + 1}: floor {table['floor'][-1]:.1f}s, baseline {table['baseline'][-1]:.1f}s, "
                f"this {table['this'][-1]:.1f}s",
                flush=True,
            )
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    ratios = {
        "baseline_x_floor": [b / f for b, f in zip(table["baseline"], table["floor"], strict=True)],
        "this_x_floor": [t / f for t, f in zip(table["this"], table["floor"], strict=True)],
        "this_x_baseline": [t / b for t, b in zip(table["this"], table["baseline"], strict=True)],
    }
    medians = {name: statistics.median(values) for name, values in ratios.items()}
    for name, value in medians.items():
        print(f"{name:<20} median {value:.3f}  rounds {', '.join(f'{v:.3f}' for v in ratios[name])}")
    return {"seconds": table, "ratios": ratios, "medians": medians, "baseline": str(baseline), "options": list(extra)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", default=DEFAULT_WHEEL)
    parser.add_argument("--workdir", default="bench-data")
    parser.add_argument("--subset", default="torch", help="a folder inside the unpacked wheel, e.g. torch/distributed")
    parser.add_argument("--corpus", metavar="NAMES", help="corpus packages (comma-separated, or all) instead of torch")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument(
        "--follow-values",
        action="store_true",
        help="also time cold and one-file-changed runs of `check --follow-values` (with --baseline: compare that mode)",
    )
    parser.add_argument(
        "--baseline", type=Path, metavar="TREE", help="a graphlint tree to compare with, round by round"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --baseline (default 3)")
    args = parser.parse_args()

    trees = corpus_trees(args.corpus) if args.corpus else [torch_tree(args.wheel, args.workdir, args.subset)]
    trees = [tree.resolve() for tree in trees]
    files = sorted(f for tree in trees for f in glob.glob(str(tree / "**" / "*.py"), recursive=True))
    if args.baseline is not None:
        extra = ("--follow-values",) if args.follow_values else ()
        compared = compare(trees, files, args.baseline, args.rounds, *extra)
        if args.json:
            Path(args.json).write_text(json.dumps({"files": len(files), "cpus": os.cpu_count(), **compared}, indent=2))
        return 0
    lines = sum(Path(f).read_bytes().count(b"\n") for f in files)
    cache = Path(tempfile.mkdtemp(prefix="graphlint-bench-cache-"))
    results, cpu = {}, {}

    def run(name: str, *run_args, **kwargs) -> None:
        results[name], cpu[name] = graphlint(*run_args, **kwargs)

    try:
        results["libcst_parse_floor"], cpu["libcst_parse_floor"] = timed(lambda: parse_floor(files))
        results["ast_parse"], cpu["ast_parse"] = timed(lambda: ast_floor(files))
        out = cache / "out"
        out.mkdir()
        (cache / "neutral.toml").write_text("")
        run("cold_jobs1", trees, cache / "a", 1, out / "cold1.json")
        peak_rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        run("cold_jobs2", trees, cache / "b", 2, out / "cold2.json")
        run("warm_jobs1", trees, cache / "a", 1, out / "warm1.json")
        run("warm_jobs2", trees, cache / "b", 2, out / "warm2.json")
        reports = {p.name: p.read_bytes() for p in out.iterdir()}
        if args.follow_values:
            run("cold_jobs1_values", trees, cache / "v", 1, out / "values.json", "--follow-values")
        identical = len(set(reports.values())) == 1
        findings = len(json.loads(reports["cold1.json"]))
        victim = Path(files[len(files) // 2])
        original = victim.read_bytes()
        try:
            victim.write_bytes(original + b"\n# changed\n")
            run("one_file_changed_jobs1", trees, cache / "a", 1, out / "changed.json")
            if args.follow_values:
                run("one_file_changed_values", trees, cache / "v", 1, out / "changed-values.json", "--follow-values")
        finally:
            victim.write_bytes(original)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    floor = results["libcst_parse_floor"]
    print(
        f"{len(files)} files, {lines} lines under {', '.join(map(str, trees))} ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    )
    print(f"{'run':<26}{'seconds':>10}{'x libcst parse':>16}{'CPU seconds':>13}")
    for name, seconds in results.items():
        print(f"{name:<26}{seconds:>10.2f}{seconds / floor:>16.2f}{cpu[name]:>13.2f}")
    print(
        f"warm / cold (jobs 1): {results['warm_jobs1'] / results['cold_jobs1']:.1%}; "
        f"one file changed / cold: {results['one_file_changed_jobs1'] / results['cold_jobs1']:.1%}"
    )
    if args.follow_values:
        print(
            f"--follow-values / names only, cold --jobs 1: {results['cold_jobs1_values'] / results['cold_jobs1']:.2f}x wall, "
            f"{cpu['cold_jobs1_values'] / cpu['cold_jobs1']:.2f}x CPU; one file changed with values / its cold: "
            f"{results['one_file_changed_values'] / results['cold_jobs1_values']:.1%}"
        )
    print(
        f"peak RSS of a cold --jobs 1 run: {peak_rss_mib:.0f} MiB; {findings} findings; "
        f"reports identical across jobs and cache states: {identical}"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "files": len(files),
                    "lines": lines,
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "seconds": results,
                    "child_cpu_seconds": cpu,
                    "peak_rss_mib_cold_jobs1": round(peak_rss_mib),
                    "findings": findings,
                    "identical_reports": identical,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
