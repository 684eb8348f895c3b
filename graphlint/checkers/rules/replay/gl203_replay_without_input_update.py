"""GL203 replay-without-input-update."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.model import Hazard, ModuleSummary
from graphlint.checkers.machinery.core.names import source_text
from graphlint.checkers.machinery.detectors import Detector, ProjectFacts
from graphlint.checkers.machinery.flows.replay.derived_inputs import Derivation, stale_derivations
from graphlint.checkers.machinery.flows.replay.record_refills import ConditionalRefill, conditional_refills
from graphlint.checkers.machinery.flows.replay.replay_flow import StaleReplay
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL203",
        name="replay-without-input-update",
        summary=(
            "A loop that calls `g.replay()` with fresh per-iteration data (a loop target, "
            "`next(it)`) that never reaches any static input (`copy_`, slice assignment, "
            "`index_copy_`, ...) before the replay. Also: a value computed from a static input "
            "before the capture (`lens_cumsum = lens.cumsum(0)`, a constructor that computes from "
            "its argument) that the capture reads and nothing keeps: refreshing the input at "
            "replay does not recompute it. And: a static input kept in a graph's record "
            '(`self.graphs[bs] = {"tables": tables, ...}`) that the replaying method refills '
            "only inside one arm of an `if` the capture did not share, while it refills other "
            "inputs on every path."
        ),
        why=(
            "The graph recomputes on the inputs it already had: every iteration returns the same "
            "result. A value computed before the capture is outside the graph: every replay reads "
            "what it was at capture. An input refilled on some paths only is stale on the others: "
            "the replay reads what an earlier call left in it."
        ),
        example="""
            import torch

            with torch.cuda.graph(g):
                static_out = model(static_x)
            for batch in loader:
                g.replay()
                outputs.append(static_out.clone())


            def capture_decode(model, graphs, bs):
                lengths = torch.ones(bs, dtype=torch.int32, device="cuda")
                graphs[bs] = {"lengths": lengths}  # refreshed before each replay
                offsets = lengths.cumsum(0)  # computed once, at capture
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    graphs[bs]["out"] = model(offsets)
                graphs[bs]["graph"] = graph


            class Decoder:
                def capture(self, bs):
                    ids, tables = torch.zeros(bs, 8, device="cuda"), torch.zeros(bs, 8, device="cuda")
                    graph = torch.cuda.CUDAGraph()
                    self.graphs[bs] = {"ids": ids, "tables": tables, "graph": graph}
                    with torch.cuda.graph(graph):
                        self.graphs[bs]["out"] = self.model(ids, tables)

                def step(self, ids, tables):
                    record = self.graphs[ids.shape[0]]
                    record["ids"].copy_(ids)
                    if BACKEND == "paged":
                        record["tables"].copy_(tables)  # the other backends replay stale tables
                    record["graph"].replay()
                    return record["out"].clone()
        """,
        use_instead="""
            import torch

            with torch.cuda.graph(g):
                static_out = model(static_x)
            for batch in loader:
                static_x.copy_(batch)
                g.replay()
                outputs.append(static_out.clone())


            def capture_decode(model, graphs, bs):
                lengths = torch.ones(bs, dtype=torch.int32, device="cuda")
                graphs[bs] = {"lengths": lengths}
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    offsets = lengths.cumsum(0)  # recomputed by every replay
                    graphs[bs]["out"] = model(offsets)
                graphs[bs]["graph"] = graph


            class Decoder:
                def capture(self, bs):
                    ids, tables = torch.zeros(bs, 8, device="cuda"), torch.zeros(bs, 8, device="cuda")
                    graph = torch.cuda.CUDAGraph()
                    self.graphs[bs] = {"ids": ids, "tables": tables, "graph": graph}
                    with torch.cuda.graph(graph):
                        self.graphs[bs]["out"] = self.model(ids, tables)

                def step(self, ids, tables):
                    record = self.graphs[ids.shape[0]]
                    record["ids"].copy_(ids)
                    record["tables"].copy_(tables if BACKEND == "paged" else tables.flip(0))
                    record["graph"].replay()
                    return record["out"].clone()
        """,
    )
)


_CONSTRUCTS = "constructs"  # condition: the class computes from one of these constructor arguments


class ReplayWithoutInputUpdate(Detector):
    rule = RULE

    def on_capture(self, w: FunctionWalker, stmt: ast.With | ast.AsyncWith, context: ast.Call) -> None:
        """Values computed from a kept static input before this capture, read in it and not kept."""
        graph = source_text(context.args[0]) if context.args else "the graph"
        for derivation in stale_derivations(w.node, stmt, w.resolve, lambda value, name: _is_tensor(w, value, name)):
            condition = (_CONSTRUCTS, derivation.made_by, *derivation.args) if derivation.made_by else ()
            w.hazard(RULE.code, derivation.stmt, _derived_message(derivation, graph), always=True, condition=condition)

    def holds(self, project: ProjectFacts, summary: ModuleSummary, hazard: Hazard, kind: str | None) -> bool:
        """A constructor computes from the static input only if its class says so (`derived_args`)."""
        if hazard.condition[:1] != (_CONSTRUCTS,):
            return True
        made_by, keys = str(hazard.condition[1]), {str(key) for key in hazard.condition[2:]}
        return any(keys & cls.derived_args for cls in project.class_chain(made_by))

    def on_Call(self, w: FunctionWalker, call: ast.Call, name: str | None) -> None:
        """A replay whose record refills one static input on some paths only (`record_refills`)."""
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "replay") or w.class_qualname is None:
            return
        cls = w.st.class_nodes.get(w.class_qualname)
        for refill in conditional_refills(w.node, call, cls) if cls is not None else ():
            w.hazard(RULE.code, refill.refill, _refill_message(refill, call), always=True)

    def on_StaleReplay(self, w: FunctionWalker, event: StaleReplay) -> None:
        w.hazard(
            RULE.code,
            event.node,
            f"`{source_text(event.node.func)}()` replays on stale inputs: the loop's fresh data "
            f"({', '.join(event.fresh)}) never reaches a static input of graph `{event.graph}`",
            always=True,
        )


def _derived_message(derivation: Derivation, graph: str) -> str:
    if derivation.made_by:
        what = f"`{derivation.made_by.rpartition('.')[2]}(...)` computes `{derivation.name}`"
    else:
        what = f"`{derivation.name}` is computed"
    return (
        f"{what} from the static input `{derivation.source}` before the capture of "
        f"`{graph}`, which reads it: the graph keeps the value of that computation, and refreshing "
        f"`{derivation.source}` before a replay does not redo it; compute it inside the capture"
    )


def _refill_message(refill: ConditionalRefill, replay: ast.Call) -> str:
    test = source_text(refill.branch.test)
    when = f"when `{test}`" if refill.field == "body" else f"when `{test}` is false"
    others = ", ".join(f"`{key}`" for key in refill.others[:3])
    return (
        f"`{refill.record}[{refill.key!r}]` is refilled before `{source_text(replay.func)}()` (line "
        f"{replay.lineno}) only {when}; the capture read it on every path, so on the other path the replay "
        f"reads what an earlier call left in it. Refill it on every path, like {others}"
    )


def _is_tensor(w: FunctionWalker, value: ast.expr | None, name: str) -> bool:
    """Is a binding a tensor: its value's kind, or for a parameter its annotation's."""
    if value is None:
        annotation = w.parameter_annotation(name)
        ty = w.annotation_ty(annotation) if annotation is not None else None
    else:
        ty = w.ty(value)
    return ty is not None and ty.tensorish
