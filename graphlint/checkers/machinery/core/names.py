"""Qualified-name resolution: what a dotted expression means, whatever it was imported as.

`import torch.cuda as tc; tc.graph(g)`, `from torch.cuda import graph` and
`torch.cuda.graphs.graph` must all be recognised as the same capture context, so every
rule matches on canonical dotted names, never on source text.
"""

from __future__ import annotations

import ast
import functools

# Public re-exports and the spellings PyTorch keeps for them: canonical name on the right.
_CANONICAL = {
    "torch.cuda.graphs.graph": "torch.cuda.graph",
    "torch.cuda.graphs.CUDAGraph": "torch.cuda.CUDAGraph",
    "torch.cuda.graphs.make_graphed_callables": "torch.cuda.make_graphed_callables",
    "torch.cuda.graphs.is_current_stream_capturing": "torch.cuda.is_current_stream_capturing",
    "torch.cuda.streams.Stream": "torch.cuda.Stream",
    "torch.cuda.streams.Event": "torch.cuda.Event",
    "torch.cuda.amp.autocast_mode.autocast": "torch.cuda.amp.autocast",
    "torch.amp.autocast_mode.autocast": "torch.autocast",
    "torch.amp.autocast": "torch.autocast",
    "torch.cuda.amp.GradScaler": "torch.amp.GradScaler",
    "torch.cuda.amp.grad_scaler.GradScaler": "torch.amp.GradScaler",
    "torch.amp.grad_scaler.GradScaler": "torch.amp.GradScaler",
    "torch.nn.utils.clip_grad.clip_grad_norm_": "torch.nn.utils.clip_grad_norm_",
    "torch._C.Generator": "torch.Generator",
    "torch.cuda.Stream.synchronize": "torch.cuda.Stream.synchronize",
    "transformer_engine.pytorch.graph.make_graphed_callables": ("transformer_engine.pytorch.make_graphed_callables"),
    "torch.accelerator.synchronize": "torch.cuda.synchronize",
    "torch.cuda.StreamContext": "torch.cuda.stream",
    "torch.cuda.streams.StreamContext": "torch.cuda.stream",
    "torch.Stream": "torch.cuda.Stream",
    "torch.Event": "torch.cuda.Event",
}


# Device modules that offer torch.cuda's stream and event operations under their own name:
# `torch.accelerator.current_stream()`, vLLM's `current_platform.Stream()` (it forwards
# unknown attributes to `torch.<device>`). The stream flow sees them as torch.cuda's.
_DEVICE_MODULES = frozenset({"torch.accelerator", "vllm.platforms.current_platform"})
DEVICE_STREAM_OPS = frozenset(
    {"current_stream", "default_stream", "Stream", "Event", "stream", "StreamContext", "synchronize", "set_stream"}
)


@functools.lru_cache(maxsize=1 << 16)  # pure, and asked over a million times on a large tree
def canonical(name: str) -> str:
    """The one spelling of a dotted name that has several (an alias, a device module's stream
    operation, a class's defining module)."""
    found = _CANONICAL.get(name)
    if found is not None:
        return found
    module, _, attr = name.rpartition(".")
    if attr in DEVICE_STREAM_OPS and module in _DEVICE_MODULES:
        return f"torch.cuda.{attr}"
    parts = name.split(".")
    # torch.optim.adam.Adam -> torch.optim.Adam; torch.nn.modules.linear.Linear -> torch.nn.Linear
    if len(parts) == 4 and parts[:2] == ["torch", "optim"] and parts[3][:1].isupper():
        return f"torch.optim.{parts[3]}"
    if len(parts) == 5 and parts[:3] == ["torch", "nn", "modules"] and parts[4][:1].isupper():
        return f"torch.nn.{parts[4]}"
    return name


def module_name_for(path_parts: list[str]) -> str:
    """Dotted module name for a file path already split into package-relative parts."""
    parts = list(path_parts)
    if parts and parts[-1].endswith(".py"):
        parts[-1] = parts[-1][:-3]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class ImportMap:
    """The names a module binds by import, mapped to the dotted names they stand for."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.is_package = is_package
        self.names: dict[str, str] = {}
        self.stars: list[str] = []  # modules imported with `from m import *`

    def _resolve_relative(self, level: int, target: str | None) -> str:
        base = self.module.split(".") if self.module else []
        # A package's own module counts as level 1; a plain module's package is its parent.
        drop = level - 1 if self.is_package else level
        if drop > len(base):
            base = []
        elif drop:
            base = base[:-drop]
        if target:
            base = base + target.split(".")
        return ".".join(base)

    def add(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.names[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    self.names[root] = root
            return
        source = node.module or ""
        if node.level:
            source = self._resolve_relative(node.level, node.module)
        for alias in node.names:
            if alias.name == "*":
                self.stars.append(source)
                continue
            local = alias.asname or alias.name
            self.names[local] = f"{source}.{alias.name}" if source else alias.name


def dotted_parts(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; ``None`` for anything that is not a plain chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        parts.reverse()
        return parts
    return None


def source_text(node: ast.AST) -> str:
    """A short, stable rendering of an expression for messages and identity keys."""
    parts = dotted_parts(node)
    if parts is not None:
        return ".".join(parts)
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - ast.unparse handles every parsed node
        return "<expr>"


# Calls into these are operations, not captured user code: never listed as unresolved.
LIBRARY_ROOTS = frozenset({"torch", "numpy", "math", "os", "sys", "time", "random", "logging", "functools", "builtins"})
