"""graphlint: a linter and runtime sanitizer for CUDA graph safety in PyTorch code."""

__version__ = "0.1.0"
