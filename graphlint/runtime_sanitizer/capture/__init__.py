"""Capturing graphs on a live device: two captures of a callable at shifted addresses, the
walk of a captured graph into a `GraphSnapshot`, and the ordering check of plain captures
(needs torch, CUDA and cuda-bindings)."""
