"""The rule registry: every rule is declared once, next to the code that finds it.

`graphlint rules`, `graphlint rule CODE`, SARIF rule metadata, the README's rule table
check and the fixture tests all read this one table, so a rule cannot exist without its
name, summary and documentation.
"""

from __future__ import annotations

import importlib
import pkgutil
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

from graphlint.findings import SEVERITIES


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    summary: str
    why: str
    example: str
    use_instead: str
    severity: str = "error"
    fix: str | None = None  # "safe" | "unsafe" | None
    # Preview: precision on the real-code corpus below 90%. Off unless `--preview` or
    # `preview = true`; the code stays the same when a rule moves in or out of preview.
    preview: bool = False
    preview_reason: str = ""  # the measured precision that keeps it in preview
    default_set_note: str = ""  # why a rule with few corpus findings stays in the default set
    # What the hazard does in each kind of capture region ("graph", "compile"), appended to
    # the candidate's message when the project phase reports it.
    consequences: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)

    def doc_page(self) -> str:
        """The rule's documentation in ruff's fixed sections."""
        fix_line = {
            None: "No automatic fix.",
            "safe": "A safe fix is available (`graphlint check --fix`).",
            "unsafe": "An unsafe fix is available (`graphlint check --fix --unsafe-fixes`).",
        }[self.fix]
        parts = [
            f"# {self.code} [{self.name}]",
            "",
            f"Severity: {self.severity}. {fix_line}",
            "",
            *self._status_lines(),
            "## What it does",
            "",
            textwrap.fill(self.summary, 88),
            "",
            "## Why is this bad?",
            "",
            textwrap.fill(self.why, 88),
            "",
            "## Example",
            "",
            "```python",
            textwrap.dedent(self.example).strip("\n"),
            "```",
            "",
            "## Use instead",
            "",
            "```python",
            textwrap.dedent(self.use_instead).strip("\n"),
            "```",
        ]
        return "\n".join(parts) + "\n"

    def _status_lines(self) -> list[str]:
        if self.preview:
            text = (
                "This rule is in preview: it runs only with `--preview` or `preview = true` in "
                f"`[tool.graphlint]`. {self.preview_reason}"
            )
            return [textwrap.fill(text.strip(), 88), ""]
        if self.default_set_note:
            return [textwrap.fill(f"In the default set: {self.default_set_note}", 88), ""]
        return []


_RULES: dict[str, Rule] = {}

# Modules that declare rules besides the static rules (discovered under
# `graphlint.checkers.rules`); imported lazily so `graphlint --version` stays instant.
_RULES_PACKAGE = "graphlint.checkers.rules"  # one module per static rule, found by walking it
_RULE_MODULES = (
    "graphlint.core_rules",
    "graphlint.runtime_sanitizer.rules",
)


def declare(rule: Rule) -> Rule:
    """Register ``rule``; a code or a name may be declared only once."""
    if rule.severity not in SEVERITIES:
        raise ValueError(f"{rule.code}: unknown severity {rule.severity!r}")
    if rule.code in _RULES:
        raise ValueError(f"rule {rule.code} declared twice")
    if any(existing.name == rule.name for existing in _RULES.values()):
        raise ValueError(f"rule name {rule.name} declared twice")
    _RULES[rule.code] = rule
    return rule


@cache
def load_rule_modules() -> tuple[str, ...]:
    """Import every module under `graphlint.checkers.rules` (each declares its rule and its
    detector), once. It lives here, not in the machinery, so the registry imports no checker."""
    package = importlib.import_module(_RULES_PACKAGE)
    names = []
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{_RULES_PACKAGE}."):
        importlib.import_module(info.name)
        names.append(info.name)
    return tuple(names)


def all_rules() -> dict[str, Rule]:
    """Every declared rule, by code, in code order."""
    for module in _RULE_MODULES:
        importlib.import_module(module)
    load_rule_modules()
    return dict(sorted(_RULES.items()))


def get_rule(code: str) -> Rule:
    """The rule with this code (any case) or kebab-case name, as users type either."""
    rules = all_rules()
    rule = rules.get(code.upper()) or _rule_by_name(rules, code)
    if rule is None:
        raise KeyError(code)
    return rule


def _rule_by_name(rules: dict[str, Rule], name: str) -> Rule | None:
    wanted = name.strip().lower()
    return next((rule for rule in rules.values() if rule.name == wanted), None)
