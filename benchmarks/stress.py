"""Stress run: graphlint over large real trees, counting what went wrong (issue #36).

A measurement script, not a test: it takes minutes to hours, on trees that are not in the
repository, and its figures (time, memory) depend on the machine. It answers "does graphlint
survive real code": for each folder it runs

    graphlint check FOLDER --no-cache --jobs N --format json --exit-zero [--follow-values]

as a subprocess under a wall-clock limit and reports the files checked, the findings by
code, GL000 (file unreadable or unparsable) and GL002 (internal error) with their messages,
crashes (exit code 2, or a Python traceback on stderr), hangs (the limit reached), wall time
and peak RSS (from os.wait4, which covers the worker processes too). A folder named with
--values is run names-only and then with --follow-values, back to back (the box is noisy),
and the ratio of the two times is recorded.

Then the file phase in this process: graphlint's per-file analysis (summarize_source, what
engine.py runs per file) is timed on every file of the folders, under a per-file limit
(SIGALRM), and the slowest files are listed: a file far slower than its size explains is a
super-linear case.

    python benchmarks/stress.py DIR... [--values DIR...] [--jobs 2] [--limit 1200] \\
        [--file-limit 60] [--exclude site-packages] [--no-file-phase | --file-phase-only] [--json out.json]
    python benchmarks/stress.py --merge a.json b.json --json all.json --md all.md

Runs from a checkout: the graphlint timed is the one importable from PYTHONPATH.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

GRAPHLINT = [sys.executable, "-m", "graphlint"]


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_child(command: list[str], limit: float) -> dict:
    """Run command under a wall-clock limit; its exit code, output, wall time, peak RSS."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=err, start_new_session=True)
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            os.killpg(child.pid, signal.SIGKILL)  # the worker processes too

        timer = threading.Timer(limit, kill)
        timer.start()
        _, status, usage = os.wait4(child.pid, 0)
        timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return {
            "exit_code": child.returncode,
            "timed_out": timed_out.is_set(),
            "wall_s": round(wall, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),  # the workers' too
            "peak_rss_mb": round(usage.ru_maxrss / 1024),  # KiB on Linux
            "stdout": out.read().decode("utf-8", "replace"),
            "stderr": err.read().decode("utf-8", "replace"),
        }


def check_folder(folder: str, values: bool, jobs: int, limit: float, exclude: list[str]) -> dict:
    command = [*GRAPHLINT, "check", folder, "--no-cache", "--jobs", str(jobs), "--format", "json", "--exit-zero"]
    command += ["--extend-exclude", ",".join(exclude)] if exclude else []
    command += ["--follow-values"] if values else []
    files = run_child([*command, "--show-files"], limit)["stdout"].splitlines()
    load = loadavg()
    result = run_child(command, limit)
    try:
        findings = json.loads(result["stdout"]) if not result["timed_out"] else []
    except json.JSONDecodeError:
        findings = []
    by_code = collections.Counter(f["code"] for f in findings)
    crashed = result["exit_code"] == 2 or "Traceback (most recent call last)" in result["stderr"]
    return {
        "folder": folder,
        "mode": "values" if values else "names",
        "command": " ".join(command),
        "files": len(files),
        "findings_by_code": dict(sorted(by_code.items())),
        "gl000": [f"{f['path']}:{f['line']}: {f['message']}" for f in findings if f["code"] == "GL000"],
        "gl002": [f"{f['path']}:{f['line']}: {f['message']}" for f in findings if f["code"] == "GL002"],
        "exit_code": result["exit_code"],
        "crashed": crashed and not result["timed_out"],
        "timed_out": result["timed_out"],
        "stderr_tail": result["stderr"][-3000:] if crashed or result["timed_out"] else "",
        "wall_s": result["wall_s"],
        "cpu_s": result["cpu_s"],
        "peak_rss_mb": result["peak_rss_mb"],
        "load_before": load,
    }


class FileTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise FileTimeout


def file_phase(folders: list[str], exclude: list[str], file_limit: int) -> dict:
    """Time summarize_source on every file graphlint would check in folders."""
    from graphlint.analysis import read_source, summarize_source
    from graphlint.config import ConfigResolver
    from graphlint.sources.discovery import discover

    signal.signal(signal.SIGALRM, _alarm)
    times, timeouts, errors = [], [], []
    for folder in folders:
        for source in discover([folder], ConfigResolver(extend_exclude=tuple(exclude))):
            data, _ = read_source(str(source.path))
            if data is None:
                continue
            start = time.perf_counter()
            signal.alarm(file_limit)
            try:
                summarize_source(data, source.module, source.is_package)
            except FileTimeout:
                timeouts.append(str(source.path))
            except Exception as error:  # a crash of the file phase is a finding here
                errors.append(f"{source.path}: {type(error).__name__}: {error}")
            finally:
                signal.alarm(0)
            times.append((time.perf_counter() - start, len(data), str(source.path)))
    times.sort(reverse=True)
    return {
        "files": len(times),
        "total_s": round(sum(t for t, _, _ in times), 1),
        "file_limit_s": file_limit,
        "timeouts": timeouts,
        "errors": errors,
        "slowest": [{"path": p, "seconds": round(t, 2), "bytes": n} for t, n, p in times[:10]],
    }


def table(runs: list[dict]) -> str:
    head = f"{'folder':<58} {'mode':<6} {'files':>6} {'GL000':>5} {'GL002':>5} {'crash':>5} {'hang':>4} {'time s':>7} {'CPU s':>7} {'RSS MB':>6}"
    lines = [head, "-" * len(head)]
    for r in runs:
        name = r["folder"] if len(r["folder"]) <= 58 else "..." + r["folder"][-55:]
        lines.append(
            f"{name:<58} {r['mode']:<6} {r['files']:>6} {len(r['gl000']):>5} {len(r['gl002']):>5} "
            f"{int(r['crashed']):>5} {int(r['timed_out']):>4} {r['wall_s']:>7} {r.get('cpu_s', '-'):>7} {r['peak_rss_mb']:>6}"
        )
    return "\n".join(lines)


def ratios(runs: list[dict]) -> dict[str, list[str]]:
    """values/names times per folder, each values run against the names run just before it:
    wall time, and CPU time where recorded (less disturbed by other work on the box)."""
    found: dict[str, list[str]] = {}
    for before, run in itertools.pairwise(runs):
        if run["mode"] == "values" and before["mode"] == "names" and before["folder"] == run["folder"]:
            if not run["timed_out"]:
                ratio = f"{run['wall_s'] / before['wall_s']:.2f}x wall"
                if run.get("cpu_s") and before.get("cpu_s"):
                    ratio += f" ({run['cpu_s'] / before['cpu_s']:.2f}x CPU)"
                found.setdefault(run["folder"], []).append(ratio)
    return found


def report(data: dict) -> str:
    files = {r["folder"]: r["files"] for r in data["runs"]}
    lines = [table(data["runs"]), ""]
    lines.append(
        f"{len(data['runs'])} runs over {len(files)} folders, {sum(files.values())} files; GL000 {sum(len(r['gl000']) for r in data['runs'])}, "
        f"GL002 {sum(len(r['gl002']) for r in data['runs'])}, crashes {sum(r['crashed'] for r in data['runs'])}, "
        f"hangs {sum(r['timed_out'] for r in data['runs'])}"
    )
    for folder, ratio in ratios(data["runs"]).items():
        lines.append(f"values/names {folder}: " + ", ".join(ratio))
    phase = data.get("file_phase")
    if phase:
        lines.append(
            f"\nfile phase: {phase['files']} files, {phase['total_s']} s, "
            f"{len(phase['timeouts'])} over {phase['file_limit_s']} s, {len(phase['errors'])} errors"
        )
        lines += [f"  {s['seconds']:>7} s {s['bytes']:>8} B  {s['path']}" for s in phase["slowest"]]
    return "\n".join(lines)


def merge(parts: list[dict]) -> dict:
    runs = [r for p in parts for r in p["runs"]]
    phases = [p["file_phase"] for p in parts if p.get("file_phase")]
    merged = {"machine": parts[0]["machine"], "runs": runs, "values_to_names": ratios(runs)}
    if phases:
        slowest = sorted((s for p in phases for s in p["slowest"]), key=lambda s: -s["seconds"])
        merged["file_phase"] = {
            "files": sum(p["files"] for p in phases),
            "total_s": round(sum(p["total_s"] for p in phases), 1),
            "file_limit_s": phases[0]["file_limit_s"],
            "timeouts": [t for p in phases for t in p["timeouts"]],
            "errors": [e for p in phases for e in p["errors"]],
            "slowest": slowest[:10],
        }
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*")
    parser.add_argument("--values", nargs="*", default=[], help="folders run with --follow-values too")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--limit", type=float, default=1200, help="wall-clock limit per run, seconds")
    parser.add_argument("--file-limit", type=int, default=60, help="per-file limit of the file phase, seconds")
    parser.add_argument("--no-file-phase", action="store_true")
    parser.add_argument("--file-phase-only", action="store_true", help="skip the graphlint runs")
    parser.add_argument("--exclude", nargs="*", default=[], help="extra exclude patterns (e.g. site-packages)")
    parser.add_argument("--merge", nargs="*", default=[], help="combine earlier --json outputs instead")
    parser.add_argument("--json")
    parser.add_argument("--md")
    args = parser.parse_args()

    if args.merge:
        data = merge([json.loads(Path(p).read_text()) for p in args.merge])
    else:
        data = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform()}, "runs": []}
        for folder in [] if args.file_phase_only else args.folders:
            data["runs"].append(check_folder(folder, False, args.jobs, args.limit, args.exclude))
            print(table(data["runs"][-1:]).splitlines()[-1], flush=True)
            if folder in args.values:
                data["runs"].append(check_folder(folder, True, args.jobs, args.limit, args.exclude))
                print(table(data["runs"][-1:]).splitlines()[-1], flush=True)
        data["values_to_names"] = ratios(data["runs"])
        if not args.no_file_phase:
            data["file_phase"] = file_phase(args.folders, args.exclude, args.file_limit)
    text = report(data)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1) + "\n")
    if args.md:
        Path(args.md).write_text("```\n" + text + "\n```\n")


if __name__ == "__main__":
    main()
