"""The runtime sanitizer's pure decisions, on plain values (no GPU): whether it may run on the
installed versions, which findings a user sees, and the graphed-gradient aliasing judgement."""

from __future__ import annotations

import pytest

from graphlint.runtime_sanitizer import availability

TESTED = {"torch": "2.11.0+cu130", "CUDA": "13.0", "cuda-bindings": "13.3.1"}


def test_the_tested_matrix_runs_without_a_note() -> None:
    assert availability.decide(TESTED, has_device=True, override=False) == availability.Availability()


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("torch", "2.13.0+cu130"),
        ("torch", "2.1.0"),
        ("CUDA", "12.8"),
        ("cuda-bindings", "12.9.0"),
        ("cuda-bindings", None),
    ],
)
def test_an_untested_version_refuses_and_names_it(name: str, version: str | None) -> None:
    state = availability.decide({**TESTED, name: version}, has_device=True, override=False)
    assert not state.active
    assert f"{name} {version or 'not installed'}" in state.reason
    assert "torch 2.11 + CUDA 13.0" in state.reason and availability.UNTESTED_ENV in state.reason


def test_the_override_runs_on_untested_versions_and_says_so() -> None:
    state = availability.decide({**TESTED, "torch": "2.13.0"}, has_device=True, override=True)
    assert state.active and "torch 2.13.0" in state.untested


def test_no_device_and_no_torch_come_before_versions() -> None:
    assert availability.decide({**TESTED, "torch": "2.13.0"}, False, False).reason == "no CUDA device"
    assert availability.decide({"torch": None}, True, False).reason == "torch is not installed"


def test_a_version_matches_its_prefix_only_at_a_boundary() -> None:
    assert availability.untested_versions({**TESTED, "torch": "2.110.0"}) == ["torch 2.110.0"]


def test_pyproject_runtime_extra_keeps_to_the_tested_matrix() -> None:
    from pathlib import Path

    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    runtime = project["project"]["optional-dependencies"]["runtime"]
    assert "torch>=2.11,<2.12" in runtime and "cuda-bindings>=13,<14" in runtime
