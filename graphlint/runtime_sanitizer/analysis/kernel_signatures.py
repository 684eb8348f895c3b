"""What a Triton kernel reads and writes, from its signature (pure: names in, roles out).

Inductor launches its kernels from Python, outside ATen operators, so the operator schemas that
give every other graph node its reads and writes say nothing about them. Their signatures do.
Inductor names a generated kernel's pointer arguments by role (`in_ptr0` is read, `out_ptr0`
written, `in_out_ptr0` both) and lists the arguments a kernel changes in place
(`mutated_arg_names`). A kernel written by hand (`@triton.jit def add(x_ptr, y_ptr, n)`) has
names no convention can be trusted for, so every tensor it is given is taken as read and written:
an ordering check that over-approximates can report a pair that is not a race, but never misses
one.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

READ = 1
WRITE = 2
BOTH = READ | WRITE


def argument_roles(names: Sequence[str], mutated: Collection[str] = (), inductor: bool = False) -> list[int]:
    """READ, WRITE or both for each argument named in ``names``, in order."""
    return [_role(name, mutated, inductor) for name in names]


def _role(name: str, mutated: Collection[str], inductor: bool) -> int:
    written = WRITE if name in mutated else 0
    if not inductor:
        return BOTH
    if name.startswith("in_out_ptr"):
        return BOTH
    if name.startswith("out_ptr"):
        return WRITE | (READ if written else 0)  # an output it also updates in place is read too
    if name.startswith("in_ptr"):
        return READ | written
    return BOTH  # a pointer Inductor names otherwise (workspaces, a user kernel it wraps)
