"""GL101 host-sync-in-capture."""

from __future__ import annotations

import ast

from graphlint.checkers.machinery.core import kinds as T
from graphlint.checkers.machinery.core.binder import FunctionWalker
from graphlint.checkers.machinery.core.model import COMPILE, GRAPH, Hazard, ModuleSummary
from graphlint.checkers.machinery.detectors import Detector, ProjectFacts
from graphlint.checkers.machinery.host_attributes import holds_host_data, read_attribute
from graphlint.checkers.rules.capture.common import arg_on_device, maybe_device_tensor, method_of, receiver_kind, short
from graphlint.registry import Rule, declare

RULE = declare(
    Rule(
        code="GL101",
        name="host-sync-in-capture",
        summary=(
            "`.item()`, `.tolist()`, `.cpu()`, `.numpy()`, `.to('cpu')`, "
            "`torch.cuda.synchronize()`, `Stream.synchronize()`, `Event.synchronize()`, "
            "`Event.query()`, `float()`/`int()`/`bool()` of a tensor, `torch.equal`/"
            "`torch.allclose`, and printing, formatting or logging a tensor, in code that runs "
            "inside a CUDA graph capture (directly or through calls)."
        ),
        why=(
            "Each of these waits for the device and reads device memory on the host. During "
            "stream capture nothing has executed yet, so CUDA rejects the sync "
            "(cudaErrorStreamCaptureUnsupported) and the capture is invalidated. Under "
            "torch.compile's CUDA graphs the sync forces a graph break and the function runs "
            "partly or wholly without a graph."
        ),
        example="""
            import torch

            with torch.cuda.graph(g):
                loss = model(static_x).mean()
                if_nan = loss.item()  # host sync: the capture fails
        """,
        use_instead="""
            import torch

            with torch.cuda.graph(g):
                loss = model(static_x).mean()
            g.replay()
            value = loss.item()  # read after replay, outside the capture
        """,
        consequences={
            GRAPH: "a host sync during stream capture fails the capture (cudaErrorStreamCaptureUnsupported)",
            COMPILE: "under torch.compile's CUDA graphs this forces a graph break, and the code runs without a graph",
        },
    )
)

_SYNC_METHODS = frozenset({"item", "tolist", "numpy"})
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
_STREAMISH = frozenset({T.STREAM, T.EVENT})
_SYNC_FUNCTIONS = frozenset({"torch.cuda.synchronize", "torch.cuda.current_stream.synchronize"})
_BOOL_FUNCTIONS = frozenset({"torch.equal", "torch.allclose", "torch.is_nonzero"})


class HostSync(Detector):
    rule = RULE

    def on_Call(self, w: FunctionWalker, call: ast.Call, name: str | None) -> None:
        message = _method_sync(w, call) if name is None else _function_sync(w, call, name)
        if message is None and _is_logging_call(call, name) and _formats_tensor(w, call):
            message = "logging a tensor formats it on the host"
        if message is not None:
            w.hazard(RULE.code, call, message, condition=_array_read(w, call) or ())

    def on_JoinedStr(self, w: FunctionWalker, node: ast.JoinedStr) -> None:
        for value in node.values:
            if isinstance(value, ast.FormattedValue) and arg_on_device(w, value.value):
                w.hazard(
                    RULE.code, node, f"formatting tensor `{short(value.value)}` in an f-string reads it on the host"
                )
                return

    def holds(self, project: ProjectFacts, summary: ModuleSummary, hazard: Hazard, kind: str | None) -> bool:
        """`batch.lens_np.max().item()`: no sync when the class (maybe in another file) holds
        host data in that attribute; the condition names the class and the attribute."""
        if not hazard.condition:
            return True
        owner, attribute = hazard.condition
        return not holds_host_data(project.class_chain(str(owner)), str(attribute))


def _method_sync(w: FunctionWalker, call: ast.Call) -> str | None:
    """`x.item()`, `x.cpu()`, `x.to('cpu')`, `s.synchronize()`, `e.query()`."""
    method, receiver = method_of(call)
    kind = receiver_kind(w, call)
    if method in _SYNC_METHODS and maybe_device_tensor(kind):
        return f"`{receiver}.{method}()` copies a tensor to the host"
    if method == "cpu" and maybe_device_tensor(kind) and not call.args:
        return f"`{receiver}.cpu()` copies a tensor to the host"
    if method == "to" and maybe_device_tensor(kind) and T.call_targets_host(call):
        return f"`{receiver}.to('cpu')` copies a tensor to the host"
    if method == "synchronize" and (kind is None or kind.kind in _STREAMISH):
        return f"`{receiver}.synchronize()` waits for the device"
    if method == "query" and kind is not None and kind.kind in _STREAMISH:
        return f"`{receiver}.query()` polls the device from the host"
    return None


def _array_read(w: FunctionWalker, call: ast.Call) -> tuple[str, str] | None:
    """`batch.lens.max().item()`: a NumPy array has `.item()` too; the class of `batch` (maybe
    in another file) says whether `lens` is one."""
    method, _ = method_of(call)
    if method not in ("item", "tolist") or not isinstance(call.func, ast.Attribute):
        return None
    return read_attribute(w, call.func.value)


def _function_sync(w: FunctionWalker, call: ast.Call, name: str) -> str | None:
    """`torch.cuda.synchronize()`, `float(t)`, `torch.equal(a, b)`, `print(t)`."""
    if name in _SYNC_FUNCTIONS:
        return "`torch.cuda.synchronize()` waits for the device"
    if name in ("float", "int", "bool", "complex") and len(call.args) == 1 and arg_on_device(w, call.args[0]):
        return f"`{name}()` of a tensor reads it on the host"
    if name in _BOOL_FUNCTIONS:
        return f"`{name}` returns a Python bool: it reads the tensors on the host"
    if name in ("print", "str", "repr", "format") and _formats_tensor(w, call):
        return f"`{name}()` of a tensor formats it on the host"
    return None


def _formats_tensor(w: FunctionWalker, call: ast.Call) -> bool:
    return any(arg_on_device(w, a) for a in call.args if not isinstance(a, ast.JoinedStr))


def _is_logging_call(call: ast.Call, name: str | None) -> bool:
    if name and name.startswith("logging."):
        return True
    method, receiver = method_of(call)
    return method in _LOG_METHODS and "log" in receiver.lower()
