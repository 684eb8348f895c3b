"""The static checker: `machinery/` (summaries, value kinds, the flow skeleton, the call graph)
and `rules/` (one module per rule, in a folder per family)."""
