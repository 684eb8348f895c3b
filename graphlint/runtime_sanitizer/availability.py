"""Whether the runtime sanitizer can work here, and if not, the reason users are told.

The sanitizer reads driver structures whose layout and meaning were verified on one stack
only; on another it could misread a graph and report (or miss) hazards that are not there.
So it refuses, loudly, outside the tested matrix below, unless the user accepts the risk
with ``GRAPHLINT_SANITIZE_UNTESTED=1`` (then it runs and says so in its report). The
decision is a pure function of the versions, so it is tested without a GPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# The one place the tested matrix lives (README "Tested versions" repeats it; pyproject's
# `runtime` extra keeps to it). A version matches a prefix at a dot or `+` boundary.
TESTED: dict[str, tuple[str, ...]] = {"torch": ("2.11",), "CUDA": ("13.0",), "cuda-bindings": ("13",)}
TESTED_ON = "torch 2.11 + CUDA 13.0 + cuda-bindings 13.x on an NVIDIA H200"
UNTESTED_ENV = "GRAPHLINT_SANITIZE_UNTESTED"


@dataclass(frozen=True)
class Availability:
    """``reason``: why the sanitizer is off ("" when it runs). ``untested``: the versions outside
    the matrix that it runs on anyway because the user set the override ("" otherwise)."""

    reason: str = ""
    untested: str = ""

    @property
    def active(self) -> bool:
        return not self.reason


def _matches(version: str, prefix: str) -> bool:
    return version == prefix or version.startswith((prefix + ".", prefix + "+"))


def untested_versions(versions: dict[str, str | None]) -> list[str]:
    """``name version`` for each component outside the tested matrix (missing ones included)."""
    found = []
    for name, prefixes in TESTED.items():
        version = versions.get(name)
        if not version or not any(_matches(version, p) for p in prefixes):
            found.append(f"{name} {version or 'not installed'}")
    return found


def decide(versions: dict[str, str | None], has_device: bool, override: bool) -> Availability:
    """The sanitizer's state from the installed versions, the device and the override."""
    if versions.get("torch") is None:
        return Availability("torch is not installed")
    if not has_device:
        return Availability("no CUDA device")
    untested = untested_versions(versions)
    if not untested:
        return Availability()
    described = ", ".join(untested)
    if override:
        return Availability(untested=f"{described} (tested: {TESTED_ON}; {UNTESTED_ENV}=1 is set)")
    return Availability(f"untested versions: {described} (tested: {TESTED_ON}); set {UNTESTED_ENV}=1 to run anyway")


def installed_versions() -> dict[str, str | None]:
    """torch, the CUDA torch was built with, and cuda-bindings (None where absent)."""
    versions: dict[str, str | None] = {"torch": None, "CUDA": None, "cuda-bindings": None}
    try:
        import torch
    except ImportError:
        return versions
    versions["torch"], versions["CUDA"] = torch.__version__, torch.version.cuda
    try:
        import cuda.bindings

        versions["cuda-bindings"] = cuda.bindings.__version__
    except ImportError:
        pass
    return versions


def availability() -> Availability:
    """The sanitizer's state in this process."""
    versions = installed_versions()
    has_device = False
    if versions["torch"] is not None:
        import torch

        has_device = torch.cuda.is_available()
    return decide(versions, has_device, os.environ.get(UNTESTED_ENV, "") not in ("", "0"))
