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
    # What the false corpus findings were, in words. The counts the page quotes beside it
    # (labelled findings, fixture cases, injected hazards) are not typed here: they come
    # from graphlint/rule_evidence_data.py, generated from the labels and fixtures.
    preview_reason: str = ""
    default_set_note: str = ""  # anything more to say about a default-set rule's evidence
    # A default-set rule's preview behaviour, in words: what it reports only with `--preview`
    # (ruff's model: a stable rule whose newer, noisier cases wait for the 90% bar).
    preview_behaviour: str = ""
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
        measured, pinned = rule_evidence(self.code)
        if self.preview:
            text = (
                "This rule is in preview: it runs only with `--preview` or `preview = true` in "
                f"`[tool.graphlint]`. {measured[:1].upper()}{measured[1:]} {self.preview_reason} {pinned}"
            )
            return [textwrap.fill(" ".join(text.split()), 88), ""]
        lines = []
        if measured or self.default_set_note:
            text = f"In the default set: {measured} {pinned} {self.default_set_note}"
            lines += [textwrap.fill(" ".join(text.split()), 88), ""]
        if self.preview_behaviour:
            text = f"Preview behaviour, only with `--preview`: {self.preview_behaviour} {preview_evidence(self.code)}"
            lines += [textwrap.fill(" ".join(text.split()), 88), ""]
        return lines


def preview_evidence(code: str) -> str:
    """How the findings of a default-set rule's preview behaviour were labelled on the corpus."""
    from graphlint.rule_evidence_data import PREVIEW_EVIDENCE

    counts = PREVIEW_EVIDENCE.get(code, {})
    labelled, true = counts.get("labelled", 0), counts.get("true", 0)
    if not labelled:
        return "It reported nothing on the corpus."
    return (
        f"On the corpus, {true} of those {labelled} labelled findings {'is' if true == 1 else 'are'} real "
        f"({true / labelled:.1%}), so they wait in preview."
    )


def rule_evidence(code: str) -> tuple[str, str]:
    """What the rule did on the real-code corpus, and what pins it, with the counts generated
    from the labels and fixtures (scripts/rule_evidence.py); empty for a rule without fixtures."""
    from graphlint.rule_evidence_data import CORPUS, EVIDENCE

    counts = EVIDENCE.get(code)
    if counts is None:
        return "", ""
    corpus = f"the real-code corpus (benchmarks/corpus: {CORPUS})"
    labelled, true = counts["labelled"], counts["true"]
    if labelled:
        share = true / labelled
        bar = "at or above" if share >= 0.9 else "below"
        measured = (
            f"on {corpus}, {true} of its {labelled} labelled findings {'is' if true == 1 else 'are'} real "
            f"({share:.1%}, {bar} the 90% bar; benchmarks/corpus/labels.jsonl)."
        )
    else:
        measured = f"it reported nothing on {corpus}, so there is no false alarm to weigh."
    injected, found = counts["injected"], counts["found"]
    if injected == 1:
        recall = f"its recall on real code by one injected hazard, {'found' if found else 'not found'}"
    elif injected:
        recall = f"its recall on real code by {injected} injected hazards, {found} of them found"
    else:
        recall = "no injected hazard measures its recall on real code yet"
    pinned = (
        f"What it reports is pinned by {counts['positives']} positive fixture cases and their negatives, "
        f"the nearest legal look-alikes (fixtures/rules/{code}); {recall} (benchmarks/corpus/injections.toml)."
    )
    return measured, pinned


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
