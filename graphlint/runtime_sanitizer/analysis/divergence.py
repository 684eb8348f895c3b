"""Where a replay first leaves eager execution (GL512), decided from per-operator records (pure).

Both sides are lists of the operators that produced device tensors, in order: the capture's
(name, Python line, graph nodes it created) and the eager run's names. The first operator
whose output differs is found by bisection over replayed prefixes of the graph, so the search
asks `differs(i)` about O(log n) operators; it assumes, as a divergence does once it starts,
that every later output depends on the first wrong one. Where the two runs called different
operators, the eager run took another path there, and the search stops at that point.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CapturedOp:
    name: str  # the ATen operator (`aten.mul.Tensor`)
    site: tuple[str, int]  # the user's line that ran it during the capture
    first_node: int  # the graph nodes it created: [first_node, end_node)
    end_node: int


@dataclass(frozen=True)
class Seen:
    """What a name the block reads held: a Python scalar's repr, or a tensor's identity."""

    identity: int
    scalar: str | None = None  # repr of an int, float, bool, str or None
    tensor: bool = False


def changed_reads(at_capture: Mapping[str, Seen], now: Mapping[str, Seen]) -> list[str]:
    """What the block reads that the program changed since the capture: a scalar with another
    value (frozen into the graph), a name or attribute bound to another tensor (the graph still
    reads the one it held)."""
    changes = []
    for text, then in at_capture.items():
        current = now.get(text)
        if current is None:
            continue
        if then.scalar is not None or current.scalar is not None:
            if then.scalar != current.scalar:
                changes.append(f"`{text}` was {then.scalar} at the capture and is {current.scalar} now")
        elif then.tensor and current.tensor and then.identity != current.identity:
            changes.append(
                f"`{text}` is another tensor than at the capture (rebound: the graph still reads the one it "
                "held then; refill that one with `copy_()`)"
            )
    return changes


@dataclass(frozen=True)
class Divergence:
    index: int  # into the captured operators
    path_differs: bool  # the eager run called another operator here (or ran out)


def same_path_length(captured: Sequence[str], eager: Sequence[str]) -> int:
    """How many operators the two runs called alike before their paths part."""
    for index, (a, b) in enumerate(zip(captured, eager, strict=False)):
        if a != b:
            return index
    return min(len(captured), len(eager))


def first_divergent(
    captured: Sequence[CapturedOp], eager: Sequence[str], differs: Callable[[int], bool]
) -> Divergence | None:
    """The first captured operator whose output differs from the eager run's, by bisection over
    the operators both runs called alike; where none of those differs but the paths part, the
    parting point; None if neither (the outputs differ for a reason no operator shows)."""
    alike = same_path_length([op.name for op in captured], eager)
    candidates = [i for i in range(alike) if captured[i].end_node > captured[i].first_node]
    low, high = 0, len(candidates)
    if high and differs(candidates[-1]):
        high -= 1  # candidates[high] differs: find the first one that does
        while low < high:
            middle = (low + high) // 2
            if differs(candidates[middle]):
                high = middle
            else:
                low = middle + 1
        return Divergence(candidates[low], path_differs=False)
    if alike < len(captured) or alike < len(eager):
        return Divergence(min(alike, len(captured) - 1), path_differs=True) if captured else None
    return None


def divergence_message(
    label: str,
    replay: int,
    outputs: Sequence[str],
    first: Divergence | None,
    captured: Sequence[CapturedOp],
    eager: Sequence[str],
    why_not: str | None = None,
    changed: Sequence[str] = (),
) -> str:
    """The GL512 finding: which outputs differ, the first operator (or why none is named), and
    what the block reads that changed since the capture."""
    text = (
        f"replay {replay} of the {label} differs from running its block eagerly on what the program holds now: "
        + "; ".join(outputs)
    )
    if first is None:
        text += f". The first differing kernel is not named: {why_not}" if why_not else ""
    elif first.path_differs:
        op = captured[first.index]
        other = eager[first.index] if first.index < len(eager) else "nothing more"
        text += (
            f". The eager run leaves the captured path at operator {first.index + 1} ({op.site[0]}:{op.site[1]}): "
            f"the capture ran `{op.name}`, eager runs `{other}`; a Python value that steers the block has changed "
            "since the capture"
        )
    else:
        op = captured[first.index]
        text += (
            f". The first kernel whose output differs is `{op.name}` at {op.site[0]}:{op.site[1]} (operator "
            f"{first.index + 1}, graph node {op.first_node + 1} of the capture): the graph replays what the capture "
            "read there, eager reads what the program holds now (a Python value changed since the capture, or a "
            "static input rebound instead of refilled)"
        )
    return text + (f". Changed since the capture: {'; '.join(changed)}" if changed else "")
