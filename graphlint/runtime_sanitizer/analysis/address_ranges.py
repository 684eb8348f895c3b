"""Device address ranges merged once and asked about many times (pure).

The launcher asks, at every call, whether an input lies in memory the graph writes; the guard
asks, at a capture's end, which inputs a Triton kernel wrote. Both sides have hundreds or
thousands of ranges: the ranges are sorted and merged once, then each question is a bisect.
"""

from __future__ import annotations

import bisect

Merged = tuple[list[int], list[int]]  # sorted, disjoint [start, end) ranges: starts, ends


def merged(ranges: list[tuple[int, int]]) -> Merged:
    """Sorted, merged [start, end) ranges as two lists, for a bisect per question."""
    starts: list[int] = []
    ends: list[int] = []
    for start, end in sorted(ranges):
        if ends and start <= ends[-1]:
            ends[-1] = max(ends[-1], end)
        else:
            starts.append(start)
            ends.append(end)
    return starts, ends


def overlaps(ranges: Merged, start: int, end: int) -> bool:
    """Whether [start, end) overlaps any of the merged ranges."""
    starts, ends = ranges
    index = bisect.bisect_right(starts, start) - 1
    if index >= 0 and start < ends[index]:
        return True
    return index + 1 < len(starts) and starts[index + 1] < end
