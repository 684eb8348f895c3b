"""launcher: see docs/layout.md."""
