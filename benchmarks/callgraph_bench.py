"""Score graphlint's call graph on PyCG's micro-benchmark (edge precision and recall).

The benchmark (119 small programs with hand-made call graphs) is public in the PyCG
repository (`micro-benchmark/snippets/<category>/<case>/`: `main.py` and `callgraph.json`);
it is not copied here. Point this script at a local copy of the `snippets` folder:

    python benchmarks/callgraph_bench.py /path/to/micro-benchmark/snippets [--json out.json]

Per case, graphlint's graph (`graphlint callgraph`, the same code, run in process) is compared
edge by edge with the ground truth: a case is *complete* when every true edge is found and
*exact* when the two edge sets are equal. Totals are edge precision and recall over all cases.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

from graphlint.checkers.machinery.project.callgraph_json import call_graph
from graphlint.config import ConfigResolver
from graphlint.engine import CheckOptions, load_project

Edge = tuple[str, str]


def edges(graph: dict[str, list[str]]) -> set[Edge]:
    return {(caller, callee) for caller, callees in graph.items() for callee in callees}


def graphlint_graph(case: Path) -> dict[str, list[str]]:
    cwd = os.getcwd()
    os.chdir(case)  # module names are relative to the case, as PyCG names them (`main`, `to_import`)
    try:
        _, project = load_project(
            ["."], ConfigResolver(cwd=case), CheckOptions(jobs=1, cache_dir=None, follow_values=True)
        )
    finally:
        os.chdir(cwd)
    return call_graph(project)


def score(snippets: Path) -> dict:
    rows = []
    for truth_file in sorted(snippets.glob("*/*/callgraph.json")):
        case = truth_file.parent
        truth = edges(json.loads(truth_file.read_text()))
        ours = edges(graphlint_graph(case))
        found = ours & truth
        rows.append(
            {
                "case": f"{case.parent.name}/{case.name}",
                "true": len(truth),
                "ours": len(ours),
                "found": len(found),
                "missing": sorted(map(list, truth - ours)),
                "extra": sorted(map(list, ours - truth)),
            }
        )
    return {"cases": rows, **totals(rows)}


def totals(rows: list[dict]) -> dict:
    true = sum(r["true"] for r in rows)
    ours = sum(r["ours"] for r in rows)
    found = sum(r["found"] for r in rows)
    return {
        "cases_total": len(rows),
        "complete": sum(1 for r in rows if not r["missing"]),
        "exact": sum(1 for r in rows if not r["missing"] and not r["extra"]),
        "precision": found / ours if ours else 1.0,
        "recall": found / true if true else 1.0,
        "missing_builtin_edges": sum(1 for r in rows for edge in r["missing"] if edge[1].startswith("<builtin>")),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("snippets", type=Path, help="PyCG's micro-benchmark/snippets folder")
    parser.add_argument("--json", type=Path, help="write per-case results and totals here")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    result = score(args.snippets)
    result["seconds"] = time.perf_counter() - start
    by_category = Counter(r["case"].split("/")[0] for r in result["cases"] if r["missing"])
    print(
        f"{result['cases_total']} cases: {result['complete']} complete, {result['exact']} exact; "
        f"edge precision {result['precision']:.1%}, recall {result['recall']:.1%} "
        f"({result['missing_builtin_edges']} missing edges are to builtins); {result['seconds']:.1f} s"
    )
    print("incomplete cases by category: " + ", ".join(f"{c} {n}" for c, n in by_category.most_common()))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
