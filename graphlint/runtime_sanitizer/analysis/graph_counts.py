"""How many graphs a sanitized run saw, how many it analysed, and which it refused to analyse
and why: a run that refused a graph did not check it, and must not be called clean."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphlint.runtime_sanitizer.analysis.coverage import Coverage


@dataclass
class GraphCounts:
    seen: int = 0
    analysed: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)  # (graph, why it was not analysed)
    poisoned_replays: int | None = None  # with --poison: replays that ran after a poisoning (None: off)
    stale_integers: list[str] = field(default_factory=list)  # --poison: integer inputs read stale, restored
    coverage: Coverage | None = None  # how much GPU work ran from graphs (None: not watched)
    compared_replays: int | None = None  # with --compare-eager: replays compared with an eager run

    def add(self, other: GraphCounts) -> None:
        self.seen += other.seen
        self.analysed += other.analysed
        self.refused.extend(other.refused)
        if other.poisoned_replays is not None:
            self.poisoned_replays = (self.poisoned_replays or 0) + other.poisoned_replays
        self.stale_integers.extend(other.stale_integers)
        if other.compared_replays is not None:
            self.compared_replays = (self.compared_replays or 0) + other.compared_replays
        if other.coverage is not None:
            if self.coverage is None:
                self.coverage = Coverage()
            self.coverage.add(other.coverage)

    def summary(self) -> str:
        """``3 graphs seen, 2 analysed, 1 refused``, with each refusal's reason."""
        text = f"{self.seen} graph{'s' if self.seen != 1 else ''} seen, {self.analysed} analysed, {len(self.refused)} refused"
        text += "".join(f"\n  refused: {graph}: {why}" for graph, why in self.refused)
        if self.poisoned_replays is not None:
            text += (
                f"\n  --poison: {self.poisoned_replays} replay{'s' if self.poisoned_replays != 1 else ''} followed "
                "a poisoning of refilled inputs (a buggy program's results change on purpose)"
            )
            text += "".join(f"\n  stale, restored, not judged: {what}" for what in self.stale_integers)
        if self.compared_replays is not None:
            text += (
                f"\n  --compare-eager: {self.compared_replays} replay{'s' if self.compared_replays != 1 else ''} "
                "compared with an eager run of the captured block"
            )
        if self.coverage is not None:
            text += "\n" + self.coverage.summary()
        return text

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "seen": self.seen,
            "analysed": self.analysed,
            "refused": [list(r) for r in self.refused],
        }
        if self.poisoned_replays is not None:
            data.update(poisoned_replays=self.poisoned_replays, stale_integers=list(self.stale_integers))
        if self.compared_replays is not None:
            data["compared_replays"] = self.compared_replays
        if self.coverage is not None:
            data["coverage"] = self.coverage.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GraphCounts:
        return cls(
            data.get("seen", 0),
            data.get("analysed", 0),
            [tuple(r) for r in data.get("refused", [])],
            data.get("poisoned_replays"),
            list(data.get("stale_integers", [])),
            Coverage.from_dict(data["coverage"]) if data.get("coverage") else None,
            data.get("compared_replays"),
        )
