"""Run a callback right after a module is first imported, without importing it ourselves.

`graphlint sanitize` must not import torch into a program that never does (five seconds of
start-up, and a different program): the guard is armed when the program's own `import
torch` has finished. A finder at the front of `sys.meta_path` answers only for that name,
once: it wraps the real loader, which puts itself back as the module's loader before the
module runs, so the module sees exactly the import it would have had.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType


def after_import(name: str, callback: Callable[[], None]) -> None:
    """Call ``callback`` once ``name`` (a top-level module) is imported; now if it already is."""
    if name in sys.modules:
        callback()
    else:
        sys.meta_path.insert(0, _Trigger(name, callback))


class _Trigger(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # once, and never in the way of the real search below
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenCall(spec.loader, self.callback)
        return spec


class _ThenCall(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, callback: Callable[[], None]) -> None:
        self.loader = loader
        self.callback = callback

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        self.callback()
