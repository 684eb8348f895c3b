"""Whether a zoo model's NaN comes from the launcher or from eager itself (needs CUDA).

For one zoo entry and dtype: NaN counts of eager, of the launcher, and of copy-in/replay/
clone-out through the launcher's own graph, on the same fresh inputs; and whether the
launcher equals eager where eager is finite. Usage:
``python scripts/diag_zoo_nan.py timm.levit_128s bfloat16``.
"""

from __future__ import annotations

import json
import sys

import torch

from benchmarks.launcher_zoo import timm_models, torchvision_models, transformers_models
from graphlint.launcher.launcher import ParameterizedLauncher


def main() -> int:
    name, dtype = sys.argv[1], getattr(torch, sys.argv[2])
    entries = [*torchvision_models(), *timm_models(), *transformers_models()]
    build, make_inputs = next((b, m) for n, b, m in entries if n == name)
    model = build().cuda().eval().to(dtype)
    cast = lambda t: t.cuda().to(dtype) if t.is_floating_point() else t.cuda()  # noqa: E731
    with torch.inference_mode():
        launcher = ParameterizedLauncher(model, tuple(cast(t) for t in make_inputs(2)), copy_when_cheaper=False)
        print(json.dumps({"fallback": launcher.fallback_reason, "patched": len(launcher._nodes)}))
        for _ in range(4):
            fresh = tuple(cast(t) for t in make_inputs(2))
            eager = model(*fresh)
            eager = eager if isinstance(eager, torch.Tensor) else eager[0]
            out = launcher(*fresh)[0]
            copied = launcher._fallback(fresh, None)[0]
            finite = torch.isfinite(eager)
            print(
                json.dumps(
                    {
                        "eager_nan": int(eager.isnan().sum()),
                        "launcher_nan": int(out.isnan().sum()),
                        "copy_replay_clone_nan": int(copied.isnan().sum()),
                        "same_nan_positions": bool(torch.equal(eager.isnan(), out.isnan())),
                        "eager_nonfinite": int((~finite).sum()),
                        "launcher_nonfinite": int((~torch.isfinite(out)).sum()),
                        "same_nonfinite_values": bool(torch.equal(eager[~finite], out[~finite])),
                        "max_err_where_eager_finite": float((out.float() - eager.float())[finite].abs().max())
                        if finite.any()
                        else None,
                        "numel": eager.numel(),
                    }
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
