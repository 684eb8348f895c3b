"""capture: see docs/layout.md."""
