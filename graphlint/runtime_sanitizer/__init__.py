"""The runtime sanitizer: see ../shared/spec/RUNTIME.md.

Layering (docs/layout.md; tests/test_architecture.py holds it): `analysis/` is pure Python,
testable on recorded snapshots, and imports neither torch nor the driver; `driver` is the one
shim over CUDA's driver API; `capture/` and `guard/` act on a live device; the front ends
(`api`, `pytest_plugin`, `session`, `run_program`) sit on top. The parameterized launcher is a
package of its own beside this one (`graphlint.launcher`). Nothing here is imported by the
static checker.
"""
