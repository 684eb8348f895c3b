"""GL104 host-to-device-copy-in-capture."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH, Hazard, ModuleSummary
from graphlint.checkers.machinery.detectors import Detector, ProjectFacts
from graphlint.checkers.rules.capture.common import method_of, receiver_kind
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL104",
        name="host-to-device-copy-in-capture",
        summary=(
            "`torch.tensor(...)`, `torch.as_tensor`, `torch.from_numpy` onto the GPU, or "
            "`.cuda()`/`.to('cuda')` of host data, in capture."
        ),
        why=(
            "The host value is copied once, at capture, and baked into the graph: every "
            "replay reuses it. Copies from pageable host memory also fail the capture."
        ),
        example="""
            import torch

            with torch.cuda.graph(g):
                scale = torch.tensor([lr], device="cuda")
                out = x * scale
        """,
        use_instead="""
            import torch

            static_scale = torch.tensor([lr], device="cuda")
            with torch.cuda.graph(g):
                out = x * static_scale
            static_scale.fill_(new_lr)  # update before replay
        """,
        consequences={
            GRAPH: "the host value is copied once at capture and every replay reuses it",
            COMPILE: "under torch.compile the host data is baked in as a constant or cudagraphs are skipped (CPU input)",
        },
    )
)

_LEGACY_CUDA_CONSTRUCTORS = frozenset(
    f"torch.cuda.{name}Tensor"
    for name in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Byte", "Bool")
)


# The condition of a copy of Python data: a finding in a raw capture only (`holds`).
_PYTHON_DATA = ("python data",)


class HostToDeviceCopy(Detector):
    rule = RULE

    def on_Call(self, w: FunctionWalker, call: ast.Call, name: str | None) -> None:
        device = T.keyword(call, "device")
        if T.is_host_factory(name) and name != "torch.from_numpy" and device is not None:
            if not T.device_is_host(device) and not _converts_a_device_tensor(w, call):
                message = f"`{name}(...)` copies host data onto the GPU"
                w.hazard(RULE.code, call, message, condition=_PYTHON_DATA if _python_data(w, call) else ())
        elif name in _LEGACY_CUDA_CONSTRUCTORS and call.args:
            message = f"`{name}(...)` copies host data onto the GPU"
            w.hazard(RULE.code, call, message, condition=_PYTHON_DATA if _python_data(w, call) else ())
        elif name is None:
            method, _ = method_of(call)
            kind = receiver_kind(w, call)
            if method in ("cuda", "to") and kind is not None and kind.kind == T.HOST:
                if method == "cuda" or T.call_targets_device(call):
                    w.hazard(RULE.code, call, f"`.{method}()` copies host data onto the GPU")

    def holds(self, project: ProjectFacts, summary: ModuleSummary, hazard: Hazard, kind: str | None) -> bool:
        """Python data copied in a torch.compile region is no stale copy: Dynamo traces the value
        and guards on it (`torch.tensor(3, device="cuda")` is a constant). A raw capture freezes it."""
        return not (kind == COMPILE and hazard.condition == _PYTHON_DATA)


def _converts_a_device_tensor(w: FunctionWalker, call: ast.Call) -> bool:
    """`torch.as_tensor(t, device=d)` of a tensor is `t.to(d)` (`torch.tensor(t, ...)` a copy on
    the device): like `.to()`, a copy of host data only when the tensor is known to be on the
    host. A parameter declared `int | Tensor` may be the tensor: what the callers pass decides,
    and the file does not see them."""
    data = call.args[0] if call.args else T.keyword(call, "data")
    if data is None:
        return False
    if T.may_be_on_device(w.ty(data)):
        return True
    annotation = w.parameter_annotation(data.id) if isinstance(data, ast.Name) else None
    return any(T.may_be_on_device(w.annotation_ty(part)) for part in _union_parts(w, annotation))


def _union_parts(w: FunctionWalker, annotation: ast.expr | None) -> list[ast.expr]:
    """`int | Tensor`, `Union[int, Tensor]`, `Optional[Tensor]` -> their alternatives."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return [*_union_parts(w, annotation.left), *_union_parts(w, annotation.right)]
    if isinstance(annotation, ast.Subscript) and (w.resolve(annotation.value) or "").endswith(("Union", "Optional")):
        inner = annotation.slice
        return [
            part
            for element in (inner.elts if isinstance(inner, ast.Tuple) else [inner])
            for part in _union_parts(w, element)
        ]
    return [annotation] if annotation is not None else []


def _python_data(w: FunctionWalker, call: ast.Call) -> bool:
    """Is the data a Python value (`torch.tensor(i, device=...)`, `[1.0, lr]`)?

    torch.compile traces it as a constant and guards on it, recompiling when it changes:
    not a copy frozen at capture. A NumPy array or a CPU tensor stays host data there too.
    """
    data = call.args[0] if call.args else T.keyword(call, "data")
    return data is not None and _is_python_value(w, data)


def _is_python_value(w: FunctionWalker, node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(_is_python_value(w, element) for element in node.elts)
    if isinstance(node, ast.UnaryOp):
        return _is_python_value(w, node.operand)
    ty = w.ty(node)
    return ty is not None and ty.kind == T.PY
