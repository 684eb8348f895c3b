"""The static checker: per-file summaries, the project call graph, and the rule families."""
