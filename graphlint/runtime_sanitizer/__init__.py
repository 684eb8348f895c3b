"""The runtime sanitizer (introspection, analysis, launcher): see ../shared/spec/RUNTIME.md.

Layering: `introspection` needs CUDA, `analysis` is pure Python and testable on recorded
snapshots, the launcher and front ends act on a live device. Nothing here is imported by
the static checker.
"""
