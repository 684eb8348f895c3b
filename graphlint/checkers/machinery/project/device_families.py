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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graphlint.checkers.machinery.core.model import ModuleSummary

FAMILIES = frozenset({"npu", "xpu", "hpu", "mlu", "musa", "ascend", "habana", "gaudi", "tpu", "mps"})


def for_other_device(module: str) -> bool:
    """Whether the module ``module`` (dotted) is written for another device family."""
    return any(part.lower().split("_", 1)[0] in FAMILIES for part in module.split("."))


class DeviceModules:
    """Which of the project's functions are another device family's, read once per file."""

    def __init__(self, functions: Mapping[str, tuple[str, Any]], summaries: Mapping[str, ModuleSummary]) -> None:
        self._functions = functions  # qualname -> (path, summary)
        self._summaries = summaries  # path -> the file's summary (its module name)
        self._known: dict[str, bool] = {}

    def other(self, qualname: str) -> bool:
        """Is ``qualname`` written for another device family?"""
        path = self._functions[qualname][0]
        found = self._known.get(path)
        if found is None:
            found = self._known[path] = for_other_device(self._summaries[path].module)
        return found

    def cuda_callees(self, caller: str, callees: list[str]) -> list[str]:
        """The callees a CUDA capture may run from ``caller``: another family's code calls its own."""
        if self.other(caller):
            return callees
        return [callee for callee in callees if not self.other(callee)]
