"""Move graphlint modules and rewrite every import of them: `python scripts/move_modules.py OLD=NEW ...`.

OLD and NEW are dotted module names (`graphlint.checkers.machinery.binder=graphlint.checkers.machinery.core.binder`).
`@FILE` reads the pairs from FILE (docs/module_moves.txt holds this layout's). Each file is moved
with `git mv` (so git's rename detection carries concurrent edits over), new packages
get an `__init__.py`, and every dotted mention of an old name in the repository's Python files and
pyproject.toml is rewritten, `from PACKAGE import MODULE` included. Run it on a merged branch too:
it rewrites the imports that others' edits added under the old names.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FROM_IMPORT = re.compile(
    r"^(?P<indent>\s*)from (?P<package>[\w.]+) import (?P<names>[^()\\#\n]+?)(?P<comment>\s*#.*)?$"
)


def module_path(name: str) -> Path:
    path = ROOT.joinpath(*name.split("."))
    return path if path.is_dir() else path.with_suffix(".py")


def ensure_package(folder: Path) -> None:
    """`folder` and its parents up to an existing package get an `__init__.py` (added to git)."""
    if (folder / "__init__.py").exists():
        return
    ensure_package(folder.parent)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(f'"""{folder.name}: see docs/layout.md."""\n')
    subprocess.run(["git", "add", str(folder / "__init__.py")], check=True, cwd=ROOT)


def move(moves: dict[str, str]) -> None:
    for old, new in moves.items():
        source = ROOT.joinpath(*old.split(".")).with_suffix(".py")
        target = ROOT.joinpath(*new.split(".")).with_suffix(".py")
        if not source.exists() or target.exists():
            continue  # moved already (a second run only rewrites imports)
        ensure_package(target.parent)
        subprocess.run(["git", "mv", str(source), str(target)], check=True, cwd=ROOT)


def rewrite_from_imports(text: str, moves: dict[str, str]) -> str:
    """`from graphlint.pkg import mod as m` where `graphlint.pkg.mod` moved: one import per moved module."""
    lines = []
    for line in text.splitlines(keepends=True):
        match = FROM_IMPORT.match(line.rstrip("\n"))
        if not match:
            lines.append(line)
            continue
        indent, package = match["indent"], match["package"]
        kept, moved = [], []
        for item in (part.strip() for part in match["names"].split(",")):
            name, _, alias = item.partition(" as ")
            target = moves.get(f"{package}.{name.strip()}")
            if target is None:
                kept.append(item)
                continue
            new_package, new_name = target.rsplit(".", 1)
            alias = alias.strip() or name.strip()
            moved.append(
                f"{indent}from {new_package} import {new_name}" + ("" if alias == new_name else f" as {alias}")
            )
        if not moved:
            lines.append(line)
            continue
        if kept:
            lines.append(f"{indent}from {package} import {', '.join(kept)}{match['comment'] or ''}\n")
        lines.extend(f"{m}{match['comment'] or ''}\n" for m in moved)
    return "".join(lines)


def rewrite(text: str, moves: dict[str, str]) -> str:
    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(moves, key=len, reverse=True))) + r")(?!\w)")

    def new_name(match: re.Match[str]) -> str:
        # `runtime_sanitizer.analysis` moved into the package of that name: in a second run,
        # `runtime_sanitizer.analysis.report` (or `from runtime_sanitizer.analysis import report`)
        # already names the package's module; leave it.
        following = re.match(r"(?:\.| import )(\w+)", text[match.end() :])
        if following and module_path(f"{match.group(1)}.{following.group(1)}").exists():
            return match.group(1)
        return moves[match.group(1)]

    return rewrite_from_imports(pattern.sub(new_name, text), moves)


def main(argv: list[str]) -> None:
    args = [line for a in argv for line in (Path(a[1:]).read_text().split() if a.startswith("@") else [a])]
    moves = dict(arg.split("=", 1) for arg in args)
    move(moves)
    tracked = subprocess.run(["git", "ls-files", "*.py", "pyproject.toml"], capture_output=True, text=True, cwd=ROOT)
    changed = []
    for name in tracked.stdout.split():
        path = ROOT / name
        if not path.exists() or name.startswith(("fixtures/", "examples/")) or name == "scripts/move_modules.py":
            continue
        text = path.read_text()
        new = rewrite(text, moves)
        if new != text:
            path.write_text(new)
            changed.append(str(path))
    py = [p for p in changed if p.endswith(".py")]
    if py:
        subprocess.run(["ruff", "check", "--fix", "--select", "I", "-q", *py], cwd=ROOT)
        subprocess.run(["ruff", "format", "-q", *py], cwd=ROOT)
    print(f"{len(moves)} modules in place, rewrote {len(changed)} files")


if __name__ == "__main__":
    main(sys.argv[1:])
