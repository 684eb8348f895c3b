"""The static machinery, in layers (docs/layout.md; tests/test_architecture.py holds them):

- `core/`: the file phase's binder and what it stands on (kinds, names, syntax, the flow
  skeleton, the per-file model); it imports no flow;
- `flows/replay/`, `flows/stream/`: analyses riding the flow skeleton, each on the core alone;
- `values/`: the opt-in value flow (`--follow-values`), file facts and their project solution;
- `project/`: the project phase (resolution, call graph, capture reach) that judges the rules'
  candidates;
- here: `summarize` (the file phase, which wires the flows into the binder), `detectors` (how a
  rule plugs in) and the few modules the rules and both phases share.

It knows no rule by name: rules live in `graphlint.checkers.rules`, one module each, and plug
in through the hooks of `machinery.detectors`.
"""
