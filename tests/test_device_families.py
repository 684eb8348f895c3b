"""A CUDA capture does not run another device family's backend: frameworks resolve calls into
every accelerator's module (`hardware_backend/npu/`, `xpu_worker.py`, `hpu_accelerator.py`)
and pick one at run time. Code of such a family calling its own modules is followed as before
(torch_npu patches `torch.cuda`, so an NPU runner's `torch.cuda.graph` is that family's)."""

from __future__ import annotations

import pytest

from conftest import check_json
from graphlint.checkers.machinery.project.device_families import for_other_device


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
