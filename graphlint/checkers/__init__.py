"""The static checker: `machinery/` (the file phase's core, the flows, the value flow, the
project phase) and `rules/` (one module per rule, in a folder per family)."""
