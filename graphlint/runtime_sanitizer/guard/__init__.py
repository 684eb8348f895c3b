"""guard: see docs/layout.md."""
