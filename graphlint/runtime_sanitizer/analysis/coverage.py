"""How much of a run's GPU work ran inside CUDA graphs (pure: reads profiler events, imports
no torch).

Users of CUDA graphs ask how much of their step actually replays from a graph, and why the
rest does not (pytorch#124506): a `torch.compile(mode="reduce-overhead")` that quietly skips
cudagraphs, a capture that fell back, a loop that was never captured. A sanitized run already
sees every capture and replay, so it can answer from the GPU's own records: each kernel the
device ran carries the correlation id of the host call that launched it, and a kernel whose
call was a graph launch (`cudaGraphLaunch`, `cuGraphLaunch`) ran from a graph. The rest ran
eagerly. The report gives both shares (launches and GPU time), the eager kernels that cost the
most, and every fallback the run was told of, with its source line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# Host calls that launch a whole graph: the runtime's and the driver's, with their suffixes
# (`cudaGraphLaunch_v10000`, `cuGraphLaunch_ptsz`).
_GRAPH_LAUNCH = re.compile(r"^(cudaGraphLaunch|cuGraphLaunch)(_|$)")
_KERNEL_CATEGORIES = frozenset({"kernel"})
_LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "runtime", "driver"})
_TOP = 5  # eager kernels listed by GPU time


@dataclass
class Fallback:
    """Work that was meant to run from a graph and did not, as the run was told: where (a
    `file:line`, or "" when the message names none) and why."""

    where: str
    reason: str


@dataclass
class Coverage:
    """Kernel launches and GPU time inside and outside graphs, with what limits the figures.

    ``measured`` is False when the GPU's records could not be read (``limits`` says why): then
    only the fallbacks are known, and no share is given."""

    measured: bool = False
    graphed_launches: int = 0
    eager_launches: int = 0
    graphed_us: float = 0.0
    eager_us: float = 0.0
    eager_kernels: dict[str, list[float]] = field(default_factory=dict)  # name -> [launches, GPU us]
    own_launches: int = 0  # the sanitizer's own checks' kernels: in neither share
    fallbacks: list[Fallback] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)

    # -- figures -------------------------------------------------------------------------
    def launch_share(self) -> float | None:
        """The percentage of kernel launches that ran from a graph (None: nothing measured)."""
        total = self.graphed_launches + self.eager_launches
        return 100.0 * self.graphed_launches / total if self.measured and total else None

    def time_share(self) -> float | None:
        """The percentage of kernel GPU time spent in kernels run from a graph."""
        total = self.graphed_us + self.eager_us
        return 100.0 * self.graphed_us / total if self.measured and total > 0 else None

    def below(self, required: float) -> bool:
        """Does the run fall short of ``required`` percent of launches graphed? A run whose
        share is unknown falls short: `--require-graphed` must not pass on no evidence."""
        share = self.launch_share()
        return share is None or share < required

    # -- combining -----------------------------------------------------------------------
    def add(self, other: Coverage) -> None:
        """Fold another run's coverage into this one (a pytest session sums its tests)."""
        self.measured = self.measured or other.measured
        self.graphed_launches += other.graphed_launches
        self.eager_launches += other.eager_launches
        self.graphed_us += other.graphed_us
        self.eager_us += other.eager_us
        self.own_launches += other.own_launches
        for name, (launches, gpu_us) in other.eager_kernels.items():
            mine = self.eager_kernels.setdefault(name, [0, 0.0])
            mine[0] += launches
            mine[1] += gpu_us
        self.fallbacks.extend(f for f in other.fallbacks if f not in self.fallbacks)
        self.limits.extend(limit for limit in other.limits if limit not in self.limits)

    # -- output --------------------------------------------------------------------------
    def summary(self) -> str:
        """The coverage lines of a run's summary."""
        lines = [f"coverage: {self._shares()}"]
        for name, (launches, gpu_us) in self.top_eager():
            lines.append(
                f"  eager: {_short(name)}: {int(launches)} launch{'es' if launches != 1 else ''}, {gpu_us:.0f} us"
            )
        lines += [f"  fell back: {f.where + ': ' if f.where else ''}{f.reason}" for f in self.fallbacks]
        if self.own_launches:
            lines.append(f"  not counted: {self.own_launches} kernel launches of the sanitizer's own checks")
        lines += [f"  limit: {limit}" for limit in self.limits]
        return "\n".join(lines)

    def _shares(self) -> str:
        launches, time = self.launch_share(), self.time_share()
        if launches is None:
            return "not measured" if not self.measured else "no kernel ran"
        total = self.graphed_launches + self.eager_launches
        text = f"{launches:.1f}% of kernel launches ran from graphs ({self.graphed_launches} of {total})"
        if time is not None:
            text += (
                f", {time:.1f}% of kernel GPU time ({_ms(self.graphed_us)} of {_ms(self.graphed_us + self.eager_us)})"
            )
        return text

    def top_eager(self) -> list[tuple[str, list[float]]]:
        """The eager kernels that took the most GPU time, most first (ties by name)."""
        ranked = sorted(self.eager_kernels.items(), key=lambda item: (-item[1][1], item[0]))
        return ranked[:_TOP]

    def to_dict(self) -> dict[str, Any]:
        return {
            "measured": self.measured,
            "launch_share": self.launch_share(),
            "time_share": self.time_share(),
            "graphed_launches": self.graphed_launches,
            "eager_launches": self.eager_launches,
            "graphed_us": round(self.graphed_us, 3),
            "eager_us": round(self.eager_us, 3),
            "own_launches": self.own_launches,
            "eager_kernels": {name: [int(n), round(us, 3)] for name, (n, us) in self.eager_kernels.items()},
            "fallbacks": [{"where": f.where, "reason": f.reason} for f in self.fallbacks],
            "limits": list(self.limits),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Coverage:
        return cls(
            measured=bool(data.get("measured")),
            graphed_launches=int(data.get("graphed_launches", 0)),
            eager_launches=int(data.get("eager_launches", 0)),
            graphed_us=float(data.get("graphed_us", 0.0)),
            eager_us=float(data.get("eager_us", 0.0)),
            own_launches=int(data.get("own_launches", 0)),
            eager_kernels={name: [int(n), float(us)] for name, (n, us) in data.get("eager_kernels", {}).items()},
            fallbacks=[Fallback(f.get("where", ""), f.get("reason", "")) for f in data.get("fallbacks", [])],
            limits=list(data.get("limits", [])),
        )


def from_trace_events(
    events: Iterable[dict[str, Any]], own_work: Sequence[tuple[int, int]] = (), base_ns: int = 0
) -> Coverage:
    """Coverage from a profiler trace's events (Chrome trace format, as `torch.profiler`
    exports it): kernels are `cat: kernel` with a duration, host calls `cuda_runtime` or
    `cuda_driver`; both carry `args.correlation`.

    ``own_work`` holds the host-time windows (ns since the epoch) of the sanitizer's own
    tensor work: a kernel launched from inside one is the sanitizer's, counted apart. A host
    call's time is ``base_ns`` (the trace's `baseTimeNanoseconds`) plus its `ts` in us."""
    events = list(events)
    graph_calls, own_calls = set(), set()
    for event in events:
        if event.get("cat") not in _LAUNCH_CATEGORIES:
            continue
        if _GRAPH_LAUNCH.match(str(event.get("name", ""))):
            graph_calls.add(_correlation(event))
        elif own_work and _within(base_ns + int(float(event.get("ts", 0.0)) * 1000), own_work):
            own_calls.add(_correlation(event))
    coverage = Coverage(measured=True)
    for event in events:
        if event.get("cat") in _KERNEL_CATEGORIES:
            _count(coverage, event, graph_calls, own_calls)
    return coverage


def _count(coverage: Coverage, kernel: dict[str, Any], graph_calls: set[object], own_calls: set[object]) -> None:
    duration = float(kernel.get("dur", 0.0) or 0.0)
    correlation = _correlation(kernel)
    if correlation in graph_calls:
        coverage.graphed_launches += 1
        coverage.graphed_us += duration
    elif correlation in own_calls:
        coverage.own_launches += 1
    else:
        coverage.eager_launches += 1
        coverage.eager_us += duration
        mine = coverage.eager_kernels.setdefault(str(kernel.get("name", "?")), [0, 0.0])
        mine[0] += 1
        mine[1] += duration


def _within(at_ns: int, windows: Sequence[tuple[int, int]]) -> bool:
    return any(start <= at_ns <= end for start, end in windows)


def _correlation(event: dict[str, Any]) -> object:
    args = event.get("args") or {}
    return args.get("correlation", args.get("correlation id"))


_FOUND_AT = re.compile(r'File "([^"]+)", line (\d+)')


def compile_fallback(message: str) -> Fallback:
    """A `torch.compile` "skipping cudagraphs due to ..." message as a fallback: its first line
    is the reason; the last `File "...", line N` it quotes (the user's frame, innermost last) is
    where."""
    lines = message.strip().splitlines() or [""]
    reason = lines[0].strip()
    reason = re.sub(r"\.?\s*Found from\s*:?\s*$", "", reason)
    found = _FOUND_AT.findall(message)
    where = f"{found[-1][0]}:{found[-1][1]}" if found else ""
    return Fallback(where, reason)


def _short(name: str, width: int = 80) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def _ms(us: float) -> str:
    return f"{us / 1000:.2f} ms"
