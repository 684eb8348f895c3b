"""Code written for another device family than CUDA: no CUDA capture runs it.

Frameworks keep each accelerator's backend in modules named for it: SGLang's
`hardware_backend/npu/`, vLLM's `xpu_worker.py` and `platforms/xpu.py`, DeepSpeed's
`accelerator/hpu_accelerator.py`. The project's code picks one at run time (a platform check,
a factory on the device type), so calls into all of them resolve, and a CUDA capture seemed to
run Ascend attention kernels and Intel memory paths. A module whose dotted name has a part
named for another family, or a part that begins with one (`npu`, `ascend_fa`,
`xpu_model_runner`), is that family's: the capture reach does not enter it from code outside
such modules. HIP is not another family here: on ROCm `torch.cuda.graph` captures HIP graphs
with the same hazards.

Backends also live side by side in one module, told apart by their names: SGLang's
`vision.py` holds `VisionAscendAttention` and `VisionIntelXPUAttention` beside the CUDA ones,
and custom ops define `forward_cuda`, `forward_npu` and `forward_xpu` on one class, bound by a
platform check. So a function whose class name has a word naming another family
(`VisionAscendAttention`, `HPUWorker`), or whose own name has such a part (`forward_npu`), is
that family's too. Names leave out `mps` and `tpu`, the words most often meant otherwise there
(CUDA's Multi-Process Service, `output`), and keep only whole words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from graphlint.checkers.machinery.core.model import ModuleSummary

FAMILIES = frozenset({"npu", "xpu", "hpu", "mlu", "musa", "ascend", "habana", "gaudi", "tpu", "mps"})
NAME_FAMILIES = FAMILIES - {"tpu", "mps"}
# The words of a CamelCase name: an acronym ends where a capitalised word begins (`XPUAttention`).
_CAMEL_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def for_other_device(module: str) -> bool:
    """Whether the module ``module`` (dotted) is written for another device family."""
    return any(part.lower().split("_", 1)[0] in FAMILIES for part in module.split("."))


def named_for_other_device(local_qualname: str) -> bool:
    """Whether a function, by its class's words or its own name's parts, is another family's:
    ``VisionAscendAttention.forward``, ``RMSNorm.forward_npu``; ``local_qualname`` is its
    qualified name inside its module."""
    *owners, name = local_qualname.split(".")
    if any(part.lower() in NAME_FAMILIES for part in name.split("_")):
        return True
    return any(word.lower() in NAME_FAMILIES for owner in owners for word in _CAMEL_WORDS.findall(owner))


class DeviceModules:
    """Which of the project's functions are another device family's, read once per file."""

    def __init__(self, functions: Mapping[str, tuple[str, Any]], summaries: Mapping[str, ModuleSummary]) -> None:
        self._functions = functions  # qualname -> (path, summary)
        self._summaries = summaries  # path -> the file's summary (its module name)
        self._modules: dict[str, bool] = {}  # path -> its module is another family's
        self._known: dict[str, bool] = {}  # qualname -> the function is another family's

    def other(self, qualname: str) -> bool:
        """Is ``qualname`` written for another device family?"""
        found = self._known.get(qualname)
        if found is None:
            found = self._known[qualname] = self._judge(qualname)
        return found

    def _judge(self, qualname: str) -> bool:
        path = self._functions[qualname][0]
        module = self._summaries[path].module
        in_module = self._modules.get(path)
        if in_module is None:
            in_module = self._modules[path] = for_other_device(module)
        return in_module or named_for_other_device(qualname.removeprefix(f"{module}."))

    def cuda_callees(self, caller: str, callees: list[str]) -> list[str]:
        """The callees a CUDA capture may run from ``caller``: another family's code calls its own."""
        if self.other(caller):
            return callees
        return [callee for callee in callees if not self.other(callee)]
