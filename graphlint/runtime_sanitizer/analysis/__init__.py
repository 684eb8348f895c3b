"""analysis: see docs/layout.md."""
