"""Copy or re-point: the cheaper way to bring each launcher input or output into the graph (pure).

Re-pointing a tensor costs per call either one driver call per node that uses it (host-side)
or one updater launch shared by every node (device-side); copying it costs one copy launch and
its bytes of memory traffic. Measured on the H200 (`benchmarks/results/launcher_speed-2026-11-30-*`,
`probe_device_updates-2026-11-30-launch.json`, `scripts/diag_launcher_cost.py`): a direct
host-side update about 1.3 us of CPU per node, a `copy_` or `clone` launch about 5 us of CPU,
the updater about 20 us of GPU latency whatever the node count, and a device-to-device copy
moves roughly 2 TB/s. So a tensor few kernels use is re-pointed (cheaper than any copy), and
one that many kernels use is copied when the copy takes less GPU time than the updater's
latency (a 16 KB input read by 80 kernels), re-pointed otherwise (a large cache or weight
tensor read by every layer). The launcher reports each copied tensor with the numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

HOST_UPDATE_US = 1.3  # CPU per node, one direct cuGraphExecKernelNodeSetParams call
COPY_LAUNCH_US = 5.0  # CPU of one copy_ or clone launch
UPDATER_LATENCY_US = 20.0  # GPU latency of the device-side updater launch
COPY_BYTES_PER_US = 2.0e6  # device-to-device copy, bytes per microsecond


def nodes_per_tensor(uses: Iterable[tuple[tuple[str, int], int]]) -> dict[tuple[str, int], int]:
    """How many distinct nodes use each tensor, from (tensor key, node index) pairs."""
    seen: dict[tuple[str, int], set[int]] = {}
    for key, node in uses:
        seen.setdefault(key, set()).add(node)
    return {key: len(nodes) for key, nodes in seen.items()}


def cheaper_to_copy(
    nodes: Mapping[tuple[str, int], int], sizes: Mapping[tuple[str, int], int]
) -> dict[tuple[str, int], str]:
    """The tensors (("input", i) / ("output", i)) cheaper to copy than to re-point, with why.

    Copy when re-pointing host-side would cost more CPU than one copy launch and the copy
    takes less GPU time than the device-side updater's latency; a tensor that every path
    re-points cheaper stays re-pointed."""
    chosen = {}
    for key, count in nodes.items():
        host_us = count * HOST_UPDATE_US
        copy_us = sizes.get(key, 0) / COPY_BYTES_PER_US
        if host_us <= COPY_LAUNCH_US or copy_us >= UPDATER_LATENCY_US:
            continue
        chosen[key] = (
            f"cheaper to copy: {count} kernels use it ({sizes.get(key, 0)} bytes); re-pointing costs about "
            f"{host_us:.0f} us of CPU host-side or {UPDATER_LATENCY_US:.0f} us of GPU latency device-side, "
            f"a copy about {COPY_LAUNCH_US:.0f} us of CPU and {copy_us:.1f} us of GPU"
        )
    return chosen
