"""Compare the outcome of every test between JUnit XML files: the first is the baseline (a
plain run), each other a run under the sanitizer, which must give the same outcome per test.
Prints the counts and each test whose outcome differs; exits 1 if any does."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def outcomes(path: str) -> dict[str, str]:
    """Test id -> passed, failed or skipped (xfail counts as skipped, as JUnit writes it)."""
    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        outcome = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        found[f"{case.get('classname')}::{case.get('name')}"] = outcome
    return found


def main(paths: list[str]) -> int:
    missing = [path for path in paths if not Path(path).exists()]
    if missing:
        print(f"no JUnit XML at {', '.join(missing)}: that run did not start; its .log says why")
        return 2
    baseline = outcomes(paths[0])
    print(f"{paths[0]}: {len(baseline)} tests, {dict(Counter(baseline.values()))}")
    differing = 0
    for path in paths[1:]:
        other = outcomes(path)
        changed = sorted(
            (k, baseline.get(k), other.get(k)) for k in set(baseline) | set(other) if baseline.get(k) != other.get(k)
        )
        differing += len(changed)
        print(f"{path}: {len(other)} tests, {len(changed)} with another outcome than {paths[0]}")
        for test, was, now in changed:
            print(f"  {test}: {was} -> {now}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
