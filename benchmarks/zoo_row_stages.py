"""Which stage of one launcher-zoo row fails (issue #34): eager, a plain capture, the launcher's
build, its calls with host-side updates, its calls with device-side updates. Each stage runs
in a fresh process with CUDA_LAUNCH_BLOCKING=1 and every stage before it, so an illegal memory
access (which poisons the whole CUDA context) is pinned to the first stage that makes it.

    python benchmarks/zoo_row_stages.py timm.crossvit_tiny_240 bfloat16
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

STAGES = ("eager", "plain", "launcher-host", "launcher-device")


def run_stages(name: str, dtype_name: str, last: str) -> None:
    """Run every stage up to `last` in this process, printing one line per stage."""
    import launcher_wide_zoo as wide
    import launcher_zoo as zoo
    import torch

    from graphlint.launcher.launcher import ParameterizedLauncher

    build, make_inputs = next((b, m) for n, b, m in wide.wide_zoo() if n == name)
    dtype = getattr(torch, dtype_name)
    model = build().cuda().eval().to(dtype)
    sample = zoo.inputs_on_device(make_inputs, dtype, 2)
    with torch.inference_mode():
        for stage in STAGES[: STAGES.index(last) + 1]:
            fresh = zoo.inputs_on_device(make_inputs, dtype, 2)
            if stage == "eager":
                out = zoo.first_output(model(*fresh))
            elif stage == "plain":
                graph, static_out = zoo.capture_plainly(model, sample)
                for mine, theirs in zip(sample, fresh, strict=True):
                    mine.copy_(theirs)
                graph.replay()
                out = zoo.first_output(static_out)
            else:
                updates = stage.split("-")[1]
                launcher = ParameterizedLauncher(model, sample, updates=updates, copy_when_cheaper=False)
                torch.cuda.synchronize()
                print(f"  {stage} build: fallback={launcher.fallback_reason!r} note={launcher.update_note!r}")
                for call in range(3):
                    print(f"  {stage} call {call}: {_compared(launcher, model, make_inputs, dtype)}", flush=True)
                out = launcher(*fresh)[0]
            torch.cuda.synchronize()
            print(f"  {stage}: ok, finite={bool(torch.isfinite(out.float()).all())}", flush=True)


def _compared(launcher, model, make_inputs, dtype) -> str:
    """One call on fresh inputs: the launcher's, the copy path's (`_fallback`) and eager's
    output, each counted for non-finite elements, and whether the first two are equal."""
    import launcher_zoo as zoo
    import torch

    fresh = zoo.inputs_on_device(make_inputs, dtype, 2)
    mine = launcher(*fresh)[0].clone()
    copied = launcher._fallback(fresh, None)[0].clone()
    eager = zoo.first_output(model(*fresh))
    bad = {
        name: int((~torch.isfinite(t.float())).sum())
        for name, t in (("launcher", mine), ("copy", copied), ("eager", eager))
    }
    return f"non-finite {bad} of {eager.numel()}, launcher == copy: {torch.equal(mine, copied)}"


def main() -> int:
    if len(sys.argv) == 4:
        run_stages(*sys.argv[1:])
        return 0
    name, dtype_name = sys.argv[1:3]
    for stage in STAGES:
        env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
        done = subprocess.run(
            [sys.executable, __file__, name, dtype_name, stage], env=env, capture_output=True, text=True
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("  ")]
        print(f"{name}[{dtype_name}] up to {stage}: exit {done.returncode}")
        print("\n".join(lines))
        if done.returncode:
            tail = [line for line in done.stderr.splitlines() if "Warning" not in line][-12:]
            print("\n".join("    " + line for line in tail))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
