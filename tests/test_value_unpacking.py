"""Unpacking in the value flow: a name bound from one position of a tuple holds what was put
at that position, not everything the tuple holds (empty lists that are filled later, and loops
over `zip`/`enumerate`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphlint.checkers.machinery.project.callgraph_json import call_graph
from graphlint.config import ConfigResolver
from graphlint.engine import CheckOptions, load_project


def _graph(write_tree, monkeypatch: pytest.MonkeyPatch, source: str) -> dict[str, list[str]]:
    root: Path = write_tree({"main.py": source})
    monkeypatch.chdir(root)
    _, project = load_project(["."], ConfigResolver(cwd=root), CheckOptions(jobs=1, cache_dir=None, follow_values=True))
    return call_graph(project)


QUEUED = """\
def produce():
    pass


def consume():
    pass


def drain():
    queue = []
    queue.append((produce, consume))
    while queue:
        made, used = queue.pop()
        used()
"""


def test_a_pair_popped_from_a_list_filled_later_unpacks_by_position(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, QUEUED)
    assert graph["main.drain"] == ["main.consume"]  # not `produce`, the pair's other half


ZIPPED = """\
def load():
    pass


def save():
    pass


def first():
    pass


def second():
    pass


def run():
    loaders = [load]
    savers = [save]
    for loader, saver in zip(loaders, savers):
        saver()
    for index, (step, _) in enumerate(zip([first], [second])):
        step()
    return [fn() for position, fn in enumerate(loaders)]
"""


def test_a_loop_over_zip_or_enumerate_binds_each_name_to_its_own_argument(write_tree, monkeypatch) -> None:
    graph = _graph(write_tree, monkeypatch, ZIPPED)
    assert sorted(graph["main.run"]) == ["<builtin>.enumerate", "<builtin>.zip", "main.first", "main.load", "main.save"]
