"""Captured callables named in a module whose file is checked under another name.

A capture that reaches nothing because its callable's module "is not analysed" is worth a
warning when the file that module stands for *is* in the run: two files took the same
module name (`train.py` in two folders, a test tree mirroring its package), and the one the
capture means got a `%N` name or another package's. `graphlint check` says so among its
notes and `graphlint captures` next to the regions, so that a clean report never hides a
capture that silently reached nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphlint.checkers.machinery.core.call_targets import CallTarget, FunctionTarget
from graphlint.checkers.machinery.core.names import LIBRARY_ROOTS
from graphlint.checkers.machinery.project.resolution import Resolver


@dataclass(frozen=True)
class MisnamedModule:
    """A capture at ``path:line`` runs ``callable``, looked up in ``module``; ``file`` holds
    that module but was analysed as ``analysed_as``."""

    path: str
    line: int
    callable: str
    module: str
    file: str
    analysed_as: str
    taken_by: str | None = None  # the file that has the name ``module``, if one does

    def message(self) -> str:
        where = (
            f"module `{self.module}` is {self.taken_by}, which does not define it"
            if self.taken_by
            else f"module `{self.module}` is not analysed"
        )
        return (
            f"{self.path}:{self.line}: the capture's callable `{self.callable}` reaches nothing: {where}, "
            f"although {self.file} is checked (as module `{self.analysed_as}`); name its folder on its own, "
            "or exclude the files that take its module names"
        )

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "line": self.line,
            "callable": self.callable,
            "module": self.module,
            "file": self.file,
            "analysed_as": self.analysed_as,
            "taken_by": self.taken_by,
        }


def misnamed_modules(project: Resolver) -> list[MisnamedModule]:
    """Every captured callable that resolves nowhere while its module's file is checked.
    Only the calls in active regions and the captured entries are looked at: a handful."""
    found: list[MisnamedModule] = []
    for path, summary in sorted(project.summaries.items()):
        for function in summary.functions.values():
            for call in function.calls:
                if call.regions and project.active_region(summary, call.regions) is not None:
                    if not project.call_callees(function, call, {}):
                        _consider(project, call.target, path, call.line, found)
        for entry in summary.entries:
            if not project.resolve_target(entry.target):
                _consider(project, entry.target, path, entry.line, found)
    return sorted(set(found), key=lambda m: (m.path, m.line, m.callable))


def _consider(project: Resolver, target: CallTarget, path: str, line: int, found: list[MisnamedModule]) -> None:
    if not isinstance(target, FunctionTarget) or target.name.partition(".")[0] in LIBRARY_ROOTS:
        return
    if defined_in_project(project, target.name):
        return
    parts = target.name.split(".")
    for end in range(len(parts) - 1, 0, -1):  # the longest module prefix first
        module = ".".join(parts[:end])
        file = _file_of(project, module)
        if file is not None:
            taken_by = next((p for p, s in sorted(project.summaries.items()) if s.module == module), None)
            found.append(MisnamedModule(path, line, target.name, module, *file, taken_by))
            return


def _file_of(project: Resolver, module: str) -> tuple[str, str] | None:
    """A checked file whose path spells ``module`` (`a/b.py`, `a/b/__init__.py`) while its
    module name is another: (its display path, the name it was analysed as)."""
    spelled = module.replace(".", "/")
    suffixes = (f"/{spelled}.py", f"/{spelled}/__init__.py")
    for path, summary in sorted(project.summaries.items()):
        shown = "/" + path.replace("\\", "/")
        if summary.module != module and shown.endswith(suffixes):
            return path, summary.module
    return None


def defined_in_project(project: Resolver, dotted: str) -> bool:
    """Whether ``dotted`` names something in an analysed module (or re-exported by one).

    `pkg.sub.fn` where `pkg` is analysed but its submodule `sub` is not (a wheel that leaves
    out `torchao._models.llama`) is not: the longest analysed module must bind the next name."""
    if dotted in project.aliases:
        return True
    head = dotted
    while head and head not in project.modules:
        if head in project.aliases:
            return True
        head = head.rpartition(".")[0]
    if not head or head == dotted:
        return bool(head)
    bound = f"{head}.{dotted[len(head) + 1 :].partition('.')[0]}"
    return (
        bound in project.aliases
        or project.resolve_name(bound) is not None
        or bound in project.flow.values
        or bound in project.flow.defs
    )
