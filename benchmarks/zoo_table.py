"""The wide zoo's per-model table (issue #34) from the JSON files its runs wrote: one row per
model and dtype, scored as PyTorch's parameterized-launch prototype is (the denominator is the
models a plain capture takes). No torch needed: it reads the results only.

    python benchmarks/zoo_table.py RUN1.json RUN2.json [--untimed RUN2.json] > table.md

A later file's row replaces an earlier one's for the same model and dtype, so pass the files
in the order they were run. A row from a `--costs-only` run (`timed_only`) gives no verdict: it
replaces only the earlier row's times and memory, and a row it has no verdict for is left out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

NOISE = {"copy_again": "the same graph", "copy_recaptured": "a second capture"}

TIMES = (
    "launcher_gpu_us",
    "copy_gpu_us",
    "launcher_cpu_us",
    "copy_cpu_us",
    "launcher_busy_us",
    "copy_busy_us",
    "launcher_host_us",
    "copy_host_us",
    "launcher_pool_mib",
    "copy_pool_mib",
    "launcher_held_mib",
    "copy_held_mib",
    # `--aa`: the copy path against itself (its own graph again, and a second capture)
    *(f"{variant}_{clock}_us" for variant in NOISE for clock in ("gpu", "cpu", "busy", "host")),
    # `--same-graph`: the copy recipe on a clone of the launcher's own graph (the same kernels)
    *(f"copy_launcher_graph_{clock}_us" for clock in ("gpu", "cpu", "busy", "host")),
)

COLUMNS = (
    "| model | dtype | result | equal to eager | patched nodes | held MiB (launcher / copy) "
    "| GPU latency us (launcher / copy) | GPU busy us (launcher / copy) | CPU us (launcher / copy) "
    "| CPU thread us, queued (launcher / copy) |"
)
RULE = "|---|---|---|---|---:|---|---|---|---|---|"


def merged(paths: list[str], untimed: list[str]) -> dict[str, dict]:
    """Rows of every file; a file in `untimed` gives its verdicts but not its times (a run of
    an experimental cost model, whose pass or fail still counts)."""
    rows: dict[str, dict] = {}
    for path in paths:
        with open(path) as handle:
            found = json.load(handle)["results"]
        if path in untimed:
            found = {key: {k: v for k, v in row.items() if k not in TIMES} for key, row in found.items()}
        for key, row in found.items():
            if not row.get("timed_only"):
                rows[key] = row
            elif rows.get(key, {}).get("pass"):  # new times over an earlier verdict
                earlier = {k: v for k, v in rows[key].items() if k not in TIMES and k != "costs"}
                rows[key] = {**earlier, **{k: v for k, v in row.items() if k in TIMES or k == "costs"}}
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
        return f"{row[mine]} / {row[theirs]}" if timed and mine in row else "-"

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
        f"| {pair('launcher_held_mib', 'copy_held_mib')} | {pair('launcher_gpu_us', 'copy_gpu_us')} "
        f"| {pair('launcher_busy_us', 'copy_busy_us')} | {pair('launcher_cpu_us', 'copy_cpu_us')} "
        f"| {pair('launcher_host_us', 'copy_host_us')} |"
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
        out.append("")
        out.append(f"Timed rows: {len(timed)}. At or below copy-in/replay/clone-out, and the median ratio:")
        out.append("")
        for label, mine, theirs in (
            ("GPU latency from an idle device", "launcher_gpu_us", "copy_gpu_us"),
            ("GPU busy time", "launcher_busy_us", "copy_busy_us"),
            ("CPU time", "launcher_cpu_us", "copy_cpu_us"),
            ("CPU time of the calling thread, calls queued", "launcher_host_us", "copy_host_us"),
        ):
            ratios = [r[mine] / r[theirs] for r in timed if r.get(mine) and r.get(theirs)]
            if ratios:
                at_or_below = sum(x <= 1 for x in ratios)
                out.append(f"- {label}: {at_or_below} of {len(ratios)}, median {statistics.median(ratios):.3f}")
        out.extend(_noise(timed))
        out.extend(_same_graph(timed))
        held = [r for r in timed if "copy_held_mib" in r]
        if held:
            # the static inputs each path keeps: the pools are one graph's either way (a first
            # capture in a process can reserve more, which is not the launcher's doing)
            saved = sorted(
                (r["copy_held_mib"] - r["copy_pool_mib"]) - (r["launcher_held_mib"] - r["launcher_pool_mib"])
                for r in held
            )
            out.append(
                f"- memory: the launcher keeps fewer static input bytes in {sum(x > 0 for x in saved)} of "
                f"{len(saved)} rows, {statistics.median(saved):.2f} MiB less in the median row, "
                f"{saved[-1]:.2f} at most"
            )
    return out


def _noise(timed: list[dict]) -> list[str]:
    """The copy path against itself on the rows an `--aa` run timed: how often, and by how much,
    a variant that differs from it in nothing but the clock's noise (its own graph again) or its
    capture (a second one) lands above it, beside the launcher's own count on the same rows."""
    out = []
    for label, key in (("GPU busy time", "busy_us"), ("CPU time of the calling thread", "host_us")):
        for variant, what in NOISE.items():
            rows = [r for r in timed if r.get(f"{variant}_{key}") and r.get(f"copy_{key}")]
            if not rows:
                continue
            again = sorted(r[f"{variant}_{key}"] / r[f"copy_{key}"] for r in rows)
            mine = [r[f"launcher_{key}"] / r[f"copy_{key}"] for r in rows if r.get(f"launcher_{key}")]
            out.append(
                f"- {label}, the copy path against itself ({what}): {sum(x <= 1 for x in again)} of "
                f"{len(again)} at or below, median {statistics.median(again):.3f}, from {again[0]:.3f} to "
                f"{again[-1]:.3f}; the launcher on the same rows: {sum(x <= 1 for x in mine)} of {len(mine)}"
            )
    return out


def _same_graph(timed: list[dict]) -> list[str]:
    """The launcher against the copy recipe on a clone of its own graph, on the rows a
    `--same-graph` run timed: the same kernels on both sides, so the count says what the
    method costs on the GPU, without the kernels two captures happen to pick (`_noise`). Only
    the GPU clocks: the recipe on the clone launches through the driver's Python bindings, not
    through `CUDAGraph.replay`'s C++, so its CPU time is the bindings' and not the copy path's
    (on 2026-12-07's H100 run it was 8-10 us a call above the copy path's own)."""
    out = []
    for label, key in (("GPU busy time", "busy_us"), ("GPU latency from an idle device", "gpu_us")):
        ratios = sorted(
            r[f"launcher_{key}"] / r[f"copy_launcher_graph_{key}"]
            for r in timed
            if r.get(f"launcher_{key}") and r.get(f"copy_launcher_graph_{key}")
        )
        if ratios:
            out.append(
                f"- {label}, the launcher against the copy recipe on its own graph: {sum(x <= 1 for x in ratios)} "
                f"of {len(ratios)} at or below, median {statistics.median(ratios):.3f}, from {ratios[0]:.3f} to "
                f"{ratios[-1]:.3f}"
            )
    return out


def _retimed(paths: list[str]) -> set[str]:
    """The rows any `--costs-only` run among ``paths`` timed."""
    found: set[str] = set()
    for path in paths:
        with open(path) as handle:
            found |= {key for key, row in json.load(handle)["results"].items() if row.get("timed_only")}
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--untimed", nargs="*", default=[], help="files whose times are not the launcher's own")
    parser.add_argument(
        "--retimed-only",
        action="store_true",
        help="only the rows a --costs-only file re-timed (a sample split over calls)",
    )
    args = parser.parse_args()
    rows = merged(args.files, args.untimed)
    if args.retimed_only:
        retimed = _retimed(args.files)
        rows = {key: row for key, row in rows.items() if key in retimed}
    print("\n".join([*summary(rows), "", COLUMNS, RULE]))
    print("\n".join(line(key, row) for key, row in rows.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
