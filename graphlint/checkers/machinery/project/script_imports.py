"""Bare imports between scripts that sit in a namespace folder of a package.

A folder without `__init__.py` inside a package is named from the package's import root
(`discovery`), so `vllm/third_party/cute/bench.py` is `vllm.third_party.cute.bench`. Such
folders often hold scripts and tests run directly, with their own folder first on
`sys.path`: `import helpers` there means the sibling `helpers.py`. Python resolves it so
only when the script runs that way, so the bare name becomes an alias of the sibling only
where nothing else can be meant:
  - exactly one module of a namespace folder (its parent package was not analysed) has
    that bare name, and no analysed top-level module or package does;
  - every module that imports the bare name sits in that same folder (so a library of the
    same name imported elsewhere, `triton`, `utils`, never resolves into the folder).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable


def script_aliases(modules: set[str], imported: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Bare module name -> full module name. ``imported`` holds (importing module, top-level
    name it imports) pairs."""
    candidates: dict[str, list[str]] = defaultdict(list)
    for module in modules:
        parent, _, bare = module.rpartition(".")
        if parent and parent not in modules:
            candidates[bare].append(module)
    tops = {module.partition(".")[0] for module in modules}
    found = {bare: full[0] for bare, full in candidates.items() if len(full) == 1 and bare not in tops}
    for importer, name in imported:
        full = found.get(name)
        if full is not None and importer.rpartition(".")[0] != full.rpartition(".")[0]:
            del found[name]  # imported from elsewhere too: maybe another module of that name
    return found
