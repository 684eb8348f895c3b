"""GL509: parameters whose `.grad` is an alias of a graphed backward's static gradient buffer
(pure logic, no CUDA; the replay guard feeds it what it sees before each replay).

`make_graphed_callables` returns the backward graph's static gradient outputs (detached) to
autograd. When a parameter has no `.grad`, AccumulateGrad adopts that tensor as `.grad`
instead of copying it: the parameter's gradient now *is* the static buffer (pytorch#181723).
The next replay of that backward graph writes the new gradient into the buffer, and
AccumulateGrad then adds the incoming gradient (the same memory) onto `.grad` in place: the
accumulated sum is lost and the result is twice the newest gradient. Zeroing `.grad` in place
does not help (the alias stays, and the replay still doubles it); only `.grad = None`
(`zero_grad(set_to_none=True)`) before each backward, or cloning the gradient in a hook,
breaks the alias. So the hazard is exact: a replay of the backward graph while some tracked
parameter's `.grad` lies in that graph's static output memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class GradRecord:
    """A tracked parameter's name and where its `.grad` storage starts (None: no `.grad`)."""

    name: str
    grad_address: int | None


def aliased_grads(records: Iterable[GradRecord], output_ranges: Sequence[tuple[int, int]]) -> tuple[str, ...]:
    """Names of the parameters whose `.grad` lies in the graph's static outputs ((start, bytes))."""
    return tuple(
        r.name
        for r in records
        if r.grad_address is not None and any(start <= r.grad_address < start + size for start, size in output_ranges)
    )


def grad_alias_message(names: Sequence[str], graph: str, replay: int) -> str:
    """The GL509 message: which parameters, which graph, what the replay does, and the fix."""
    shown = ", ".join(f"`{n}`" for n in names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return (
        f"the .grad of {shown} is an alias of the static gradient buffer of the {graph}: backward replay "
        f"{replay} overwrites the gradients accumulated since the previous backward, and the accumulation then "
        "adds the new gradient onto itself (pytorch#181723); call optimizer.zero_grad(set_to_none=True) (or set "
        "each .grad to None) before every backward, zeroing in place keeps the alias, or clone the gradients "
        "in a hook"
    )


class GradAliasTracker:
    """Per graph: the parameters already reported (one finding names a parameter once per graph,
    however many steps repeat its alias; a later step that aliases only some of them again is
    not news)."""

    def __init__(self) -> None:
        self.reported: set[tuple[int, str]] = set()

    def judge(
        self, graph_id: int, records: Iterable[GradRecord], output_ranges: Sequence[tuple[int, int]]
    ) -> tuple[str, ...]:
        """The aliased parameter names to report now (empty when none, or all already reported)."""
        names = tuple(n for n in aliased_grads(records, output_ranges) if (graph_id, n) not in self.reported)
        self.reported.update((graph_id, n) for n in names)
        return names
