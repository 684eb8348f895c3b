"""The README's install lines work from a clone and name this project, never the unrelated
`graphlint` distribution on the package index."""

from __future__ import annotations

import re
import sys

from conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# `pip install ...` in a code block or in backquotes, possibly across a line break.
_INSTALL = re.compile(r"pip\s+install\s+((?:-e\s+)?'?[^\s'`)]+'?)")


def _requirements() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [match.strip("'") for match in _INSTALL.findall(text)]


def test_the_distribution_is_not_named_like_the_unrelated_one_on_the_index() -> None:
    assert PROJECT["name"] != "graphlint"
    assert PROJECT["scripts"] == {"graphlint": "graphlint.cli:main"}  # the command keeps its name


def test_every_readme_install_line_names_the_clone_or_this_distribution_with_real_extras() -> None:
    requirements = _requirements()
    assert len(requirements) >= 5
    extras = set(PROJECT["optional-dependencies"])
    for requirement in requirements:
        target = requirement.removeprefix("-e").strip().strip("'")
        name, _, wanted = target.partition("[")
        assert name in (".", PROJECT["name"]), requirement
        assert set(filter(None, wanted.rstrip("]").split(","))) <= extras, requirement
