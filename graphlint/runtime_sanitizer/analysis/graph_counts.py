"""How many graphs a sanitized run saw, how many it analysed, and which it refused to analyse
and why: a run that refused a graph did not check it, and must not be called clean."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class GraphCounts:
    seen: int = 0
    analysed: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)  # (graph, why it was not analysed)

    def add(self, other: GraphCounts) -> None:
        self.seen += other.seen
        self.analysed += other.analysed
        self.refused.extend(other.refused)

    def summary(self) -> str:
        """``3 graphs seen, 2 analysed, 1 refused``, with each refusal's reason."""
        text = f"{self.seen} graph{'s' if self.seen != 1 else ''} seen, {self.analysed} analysed, {len(self.refused)} refused"
        return text + "".join(f"\n  refused: {graph}: {why}" for graph, why in self.refused)

    def to_dict(self) -> dict[str, Any]:
        return {"seen": self.seen, "analysed": self.analysed, "refused": [list(r) for r in self.refused]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GraphCounts:
        return cls(data.get("seen", 0), data.get("analysed", 0), [tuple(r) for r in data.get("refused", [])])
