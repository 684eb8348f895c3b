"""The wide zoo's per-model table (issue #34) from the JSON files its runs wrote: one row per
model and dtype, scored as PyTorch's parameterized-launch prototype is (the denominator is the
models a plain capture takes). No torch needed: it reads the results only.

    python benchmarks/zoo_table.py RUN1.json RUN2.json [--untimed RUN2.json] > table.md

A later file's row replaces an earlier one's for the same model and dtype, so pass the files
in the order they were run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

TIMES = ("launcher_gpu_us", "copy_gpu_us", "launcher_cpu_us", "copy_cpu_us")

COLUMNS = "| model | dtype | result | equal to eager | patched nodes | pool MiB (launcher / copy) | GPU us (launcher / copy) | CPU us (launcher / copy) |"


def merged(paths: list[str], untimed: list[str]) -> dict[str, dict]:
    """Rows of every file; a file in `untimed` gives its verdicts but not its times (a run of
    an experimental cost model, whose pass or fail still counts)."""
    rows: dict[str, dict] = {}
    for path in paths:
        with open(path) as handle:
            found = json.load(handle)["results"]
        if path in untimed:
            found = {key: {k: v for k, v in row.items() if k not in TIMES} for key, row in found.items()}
        rows.update(found)
    return rows


def verdict(row: dict) -> str:
    if row["pass"] is None:
        return f"skipped: {row.get('skipped', '')}"
    if row["pass"]:
        return "pass"
    kind = "fail" if row.get("capturable", True) else "not capturable"
    return f"{kind}: {row.get('cause', '')[:100]}"


def line(key: str, row: dict) -> str:
    model, dtype = key[:-1].split("[")
    timed = "copy_gpu_us" in row

    def pair(mine: str, theirs: str) -> str:
        return f"{row[mine]} / {row[theirs]}" if timed else "-"

    exact = row.get("bit_identical", "-")
    equal = (
        f"bit for bit {exact}"
        if exact == "3/3"
        else f"{exact} bit for bit, rest within tolerance"
        if row.get("pass")
        else "-"
    )
    return (
        f"| {model} | {dtype} | {verdict(row)} | {equal} | {row.get('patched_nodes', '-')} "
        f"| {pair('launcher_pool_mib', 'copy_pool_mib')} | {pair('launcher_gpu_us', 'copy_gpu_us')} "
        f"| {pair('launcher_cpu_us', 'copy_cpu_us')} |"
    )


def summary(rows: dict[str, dict]) -> list[str]:
    out = [
        "| dtype | pass | capturable with plain graphs | scored | skipped (over the size cap) |",
        "|---|---:|---:|---:|---:|",
    ]
    for dtype in sorted({key[:-1].split("[")[1] for key in rows}, reverse=True):
        mine = [r for k, r in rows.items() if k.endswith(f"[{dtype}]")]
        scored = [r for r in mine if r["pass"] is not None]
        capturable = [r for r in scored if r["pass"] or r.get("capturable")]
        passed = sum(bool(r["pass"]) for r in scored)
        out.append(f"| {dtype} | {passed} | {len(capturable)} | {len(scored)} | {len(mine) - len(scored)} |")
    timed = [r for r in rows.values() if r.get("pass") and "copy_gpu_us" in r]
    if timed:
        gpu = [r["launcher_gpu_us"] / r["copy_gpu_us"] for r in timed]
        cpu = [r["launcher_cpu_us"] / r["copy_cpu_us"] for r in timed]
        out.append("")
        out.append(
            f"Timed rows: {len(timed)}. At or below copy-in/replay/clone-out: GPU {sum(g <= 1 for g in gpu)}, "
            f"CPU {sum(c <= 1 for c in cpu)}. Median ratio: GPU {statistics.median(gpu):.3f}, "
            f"CPU {statistics.median(cpu):.3f}."
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--untimed", nargs="*", default=[], help="files whose times are not the launcher's own")
    args = parser.parse_args()
    rows = merged(args.files, args.untimed)
    print("\n".join([*summary(rows), "", COLUMNS, "|---|---|---|---|---:|---|---|---|"]))
    print("\n".join(line(key, row) for key, row in rows.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
