"""Whether the runtime sanitizer can work here, and if not, the reason users are told."""

from __future__ import annotations


def inactive_reason() -> str:
    """ "" when torch with a CUDA device is available; otherwise why the sanitizer is off."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return "" if torch.cuda.is_available() else "no CUDA device"
