"""A CUDA capture does not run another device family's backend: frameworks resolve calls into
every accelerator's module (`hardware_backend/npu/`, `xpu_worker.py`, `hpu_accelerator.py`)
and pick one at run time. Code of such a family calling its own modules is followed as before
(torch_npu patches `torch.cuda`, so an NPU runner's `torch.cuda.graph` is that family's)."""

from __future__ import annotations

import pytest

from conftest import check_json
from graphlint.checkers.machinery.project.device_families import for_other_device, named_for_other_device


@pytest.mark.parametrize(
    ("module", "other"),
    [
        ("sglang.srt.hardware_backend.npu.attention.ascend_backend", True),
        ("vllm.v1.worker.xpu_worker", True),
        ("accelerator.hpu_accelerator", True),
        ("pkg.platforms.mps", True),
        ("pkg.lora.backend.ascend_backend", True),
        ("megatron.core.transformer.attention", False),
        ("pkg.rocm_attention", False),  # HIP graphs: torch.cuda.graph on ROCm, the same hazards
        ("pkg.ops.xpuish", False),
        ("pkg.models.neuron_utils", False),
    ],
)
def test_a_module_named_for_another_family_is_that_familys(module: str, other: bool) -> None:
    assert for_other_device(module) is other


@pytest.mark.parametrize(
    ("qualname", "other"),
    [
        ("VisionAscendAttention.forward", True),
        ("VisionIntelXPUAttention.forward", True),  # an acronym ends where the next word begins
        ("NPUGraphRunner.capture", True),
        ("HpuWorker.execute", True),
        ("RMSNorm.forward_npu", True),
        ("forward_xpu.<locals>.step", True),  # nested in another family's function
        ("RMSNorm.forward_cuda", False),
        ("CudaGraphRunner.capture", False),
        ("ModelOutputs.forward", False),  # `Outputs`: no word of a family inside a word
        ("Npuish.step", False),
        ("MPSConfig.set_mps_share", False),  # CUDA's Multi-Process Service, not Apple's
        ("Sampler.output_tpu", False),
    ],
)
def test_a_class_or_function_named_for_another_family_is_that_familys(qualname: str, other: bool) -> None:
    assert named_for_other_device(qualname) is other


RUNNER = """\
import torch

from backends.helpers import prepare


def graph_step(backend, x, graph):
    with torch.cuda.graph(graph):
        prepare(x)
        if hasattr(backend, "run_graphed"):
            return backend.run_graphed(x)
    return None
"""

NPU_RUNNER = """\
import torch

from backends.npu.helpers import npu_prepare


def npu_graph_step(x, graph):
    with torch.cuda.graph(graph):  # torch_npu patches torch.cuda: the family's own capture
        return npu_prepare(x)
"""


def test_a_cuda_capture_skips_other_families_and_theirs_keep_their_own(write_tree) -> None:
    root = write_tree(
        {
            "runner.py": RUNNER,
            "npu_runner.py": NPU_RUNNER,
            "backends/__init__.py": "",
            "backends/helpers.py": "def prepare(x):\n    return x.sum().item()\n",
            "backends/cuda_attention.py": "class A:\n    def run_graphed(self, x):\n        return x.tolist()\n",
            "backends/npu/__init__.py": "",
            "backends/npu/attention.py": "class B:\n    def run_graphed(self, x):\n        return x.item()\n",
            "backends/npu/helpers.py": "def npu_prepare(x):\n    return x.max().item()\n",
        }
    )
    found = sorted((f["path"], f["line"]) for f in check_json("--select", "GL101", ".", cwd=root))
    assert found == [
        ("./backends/cuda_attention.py", 3),
        ("./backends/helpers.py", 2),
        ("./backends/npu/helpers.py", 2),
    ]


SIDE_BY_SIDE = """\
import torch


class CudaAttention:
    def run_graphed(self, x):
        return x.tolist()


class AscendAttention:
    def run_graphed(self, x):
        return x.item()


class Norm:
    def forward_cuda(self, x):
        return x.sum().item()

    def forward_npu(self, x):
        return x.max().item()


def graph_step(on_npu, x, graph):
    backend = AscendAttention() if on_npu else CudaAttention()
    norm = Norm()
    with torch.cuda.graph(graph):
        norm.forward_cuda(x)
        norm.forward_npu(x)
        return backend.run_graphed(x)
"""


def test_backends_side_by_side_in_one_module_are_told_apart_by_name(write_tree) -> None:
    """SGLang's vision.py keeps Ascend and Intel XPU attention beside the CUDA ones, and custom
    ops bind `forward_cuda` or `forward_npu` by platform: a CUDA capture runs only the CUDA ones.
    The backend picked by a condition is reached through the value flow."""
    root = write_tree({"attention.py": SIDE_BY_SIDE})
    found = sorted(f["line"] for f in check_json("--select", "GL101", "--follow-values", ".", cwd=root))
    assert found == [6, 16]
