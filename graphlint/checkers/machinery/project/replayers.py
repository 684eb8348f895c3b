"""The project's replay sides: functions that replay a CUDA graph every time they run.

The file phase marks a function that always replays a graph it can name, and keeps the other
`.replay(...)` calls it always makes (`flows/replay/replay_sides`). Here those calls are resolved: a
function whose always-made `.replay(...)` runs a replay side is one too (a runner's `execute`
that always calls `self.backend.replay(key, batch)`, whose backends replay their graphs). The
capture reach does not follow a call from captured code into a replay side: code replays a
graph outside the capture that made it, never inside another one.
"""

from __future__ import annotations

from collections.abc import Mapping

from graphlint.checkers.machinery.core.model import CallRef, FunctionSummary
from graphlint.checkers.machinery.project.resolution import Resolver


def replay_sides(resolver: Resolver) -> frozenset[str]:
    """Every function of the project that replays a graph on each path that returns."""
    found = {qualname for qualname, (_, function) in resolver.functions.items() if function.replays}
    pending = _delegating(resolver.functions)
    changed = True
    while changed:  # a chain of delegations settles one link per round
        changed = False
        for qualname, (function, calls) in list(pending.items()):
            if any(callee in found for call in calls for callee in resolver.call_callees(function, call, {})):
                found.add(qualname)
                del pending[qualname]
                changed = True
    return frozenset(found)


def _delegating(
    functions: Mapping[str, tuple[str, FunctionSummary]],
) -> dict[str, tuple[FunctionSummary, list[CallRef]]]:
    """The functions not yet known as replay sides whose always-made `.replay(...)` calls may
    run one, with those calls as the file phase recorded them."""
    pending: dict[str, tuple[FunctionSummary, list[CallRef]]] = {}
    for qualname, (_, function) in functions.items():
        if function.replays or not function.replay_calls:
            continue
        positions = set(function.replay_calls)
        calls = [call for call in function.calls if (call.line, call.column) in positions]
        if calls:
            pending[qualname] = (function, calls)
    return pending
