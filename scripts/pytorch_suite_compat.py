"""A conftest for running PyTorch's `test/test_cuda.py` of a newer release on an older torch
(`scripts/pytorch_graph_suite.sh` copies it beside the file). Names the file imports from torch
that this torch lacks become stubs, so that the file collects and every test the installed
torch can run does run: a flag (`TEST_*`, `PLATFORM_*`, upper case) becomes False; anything
else a callable that skips the test using it, as a decorator or when called. The stubbed names
are printed: the run's log says which tests could not be exercised, and why."""

from __future__ import annotations

import ast
import importlib
import os
import pathlib
import unittest
from typing import Any

STUBBED: list[str] = []


class Missing:
    """Stands for a name this torch lacks; whatever uses it skips, saying which name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            target = args[0]
            if isinstance(target, type):
                return target  # a class decorator: the class's tests run on their own merits
            return self._skipping(target)
        if args or kwargs:
            return self  # a decorator factory: `@stub(0.005)`
        raise unittest.SkipTest(f"{self.name} is missing in this torch")

    def _skipping(self, test: Any) -> Any:
        name = self.name

        def skipped(*args: Any, **kwargs: Any) -> None:
            raise unittest.SkipTest(f"{name} is missing in this torch")

        skipped.__name__ = getattr(test, "__name__", "test")
        return skipped

    def __getattr__(self, attr: str) -> Any:
        raise unittest.SkipTest(f"{self.name}.{attr} is missing in this torch")


def stub_missing(source: pathlib.Path) -> list[str]:
    """Give each `from torch... import name` of ``source`` that this torch lacks a stub."""
    stubbed = []
    for node in ast.parse(source.read_text()).body:
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("torch"):
            continue
        module = importlib.import_module(node.module)
        for alias in node.names:
            if hasattr(module, alias.name):
                continue
            flag = alias.name.isupper() or alias.name.startswith(("TEST_", "PLATFORM_"))
            setattr(module, alias.name, False if flag else Missing(alias.name))
            stubbed.append(f"{node.module}.{alias.name}")
    return stubbed


if __name__ == "conftest":  # copied beside the file as its conftest; imported, it does nothing
    STUBBED.extend(stub_missing(pathlib.Path(os.environ.get("GRAPHLINT_SUITE_FILE", "test_cuda.py")).resolve()))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """In every run's log, even under -q: which names were stubbed."""
    terminalreporter.write_line(f"[compat] stubbed: {', '.join(STUBBED) or 'nothing'}")
