"""Training steps through the parameterized launcher, against PyTorch's capture recipe (needs CUDA).

For models of the launcher zoo (fp32, train mode): one step is forward, loss, backward and a
capturable Adam step. The launcher is built on the step and called on 10 fresh batches (new
tensors every step, no copy); a twin model (same weights and optimizer state) follows PyTorch's
recipe: static inputs, `copy_`, replay of its own capture. Both start from the same CUDA RNG
state (dropout draws from it on replay), so the same kernels must give the same bits: every
loss, and at the end every parameter, buffer and optimizer state tensor, compared with
`torch.equal`. Deterministic algorithms are on, so that atomics cannot make two replays of the
same graph differ.

    python benchmarks/launcher_train_zoo.py [--json out.json] [--steps 10]
"""

from __future__ import annotations

import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import argparse
import copy
import json
import platform
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(__file__))
import launcher_zoo as zoo

MODELS = [
    "torchvision.resnet18",
    "torchvision.mobilenet_v3_small",
    "torchvision.efficientnet_b0",
    "torchvision.squeezenet1_1",
    "torchvision.vit_b_16",
    "timm.resnet26d",
    "timm.deit_tiny_patch16_224",
    "timm.convnext_atto",
    "timm.mixer_s16_224",
    "timm.regnetx_002",
    "transformers.bert",
    "transformers.gpt2",
    "transformers.llama",
    "transformers.distilbert",
    "transformers.opt",
    "transformers.t5-encoder",
]


def entries() -> dict:
    found = {}
    for source in (zoo.torchvision_models, zoo.timm_models, zoo.transformers_models):
        try:
            found.update({name: (build, make) for name, build, make in source()})
        except Exception as error:  # a library missing on this machine
            print(f"skipping {source.__name__}: {error}")
    return found


def make_step(model, optimizer, text: bool):
    """forward, loss, backward, capturable Adam step; returns the loss."""

    def step(x, target):
        optimizer.zero_grad(set_to_none=True)
        out = model(x)
        loss_fn = torch.nn.functional.mse_loss if text else torch.nn.functional.cross_entropy
        loss = loss_fn(out, target)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def batch_maker(make_inputs, text: bool, batch: int):
    def make():
        (x,) = make_inputs(batch)
        x = x.cuda()
        target = torch.randn(batch, 64, 128, device="cuda") if text else torch.randint(0, 1000, (batch,), device="cuda")
        return x, target

    return make


def state_of(model, optimizer) -> list:
    tensors = [*model.parameters(), *model.buffers()]
    return tensors + [v for p in model.parameters() for v in optimizer.state[p].values() if torch.is_tensor(v)]


def recipe(step, static, state) -> tuple:
    """PyTorch's recipe on the twin: warm up on a side stream, capture, then undo the warm-up."""
    saved = [t.detach().clone() for t in state]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = step(*static)
    with torch.no_grad():
        for tensor, copied in zip(state, saved, strict=True):
            tensor.copy_(copied)
    return graph, loss


def run_one(name: str, build, make_inputs, steps: int, batch: int = 4) -> dict:
    from graphlint.launcher.launcher import ParameterizedLauncher

    text = name.startswith("transformers.")
    torch.manual_seed(0)
    model = build().cuda().train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, capturable=True)
    make = batch_maker(make_inputs, text, batch)
    step = make_step(model, optimizer, text)
    first = make()
    step(*first)  # the optimizer creates its state lazily
    twin, twin_optimizer = copy.deepcopy((model, optimizer))
    twin_step = make_step(twin, twin_optimizer, text)
    batches = [make() for _ in range(steps)]
    start = time.perf_counter()
    # re-pointing measured: nothing copied because copying would be cheaper
    launcher = ParameterizedLauncher(step, first, module=model, optimizer=optimizer, copy_when_cheaper=False)
    build_s = time.perf_counter() - start
    if launcher.fallback_reason:
        return {"pass": False, "cause": f"fallback: {launcher.fallback_reason}"}
    static = [t.clone() for t in first]
    graph, static_loss = recipe(twin_step, static, state_of(twin, twin_optimizer))
    rng = torch.cuda.get_rng_state()
    mine = [launcher(*b)[0].clone() for b in batches]
    torch.cuda.set_rng_state(rng)
    theirs = []
    for b in batches:
        for s, new in zip(static, b, strict=True):
            s.copy_(new)
        graph.replay()
        theirs.append(static_loss.clone())
    equal_losses = sum(torch.equal(a, b) for a, b in zip(mine, theirs, strict=True))
    equal_state = all(
        torch.equal(a, b) for a, b in zip(state_of(model, optimizer), state_of(twin, twin_optimizer), strict=True)
    )
    moved = not torch.equal(mine[0], mine[-1])
    return {
        "pass": equal_losses == steps and equal_state and moved,
        "equal_losses": f"{equal_losses}/{steps}",
        "equal_state": equal_state,
        "losses": [round(float(v), 5) for v in mine[:3]] + ["..."] + [round(float(mine[-1]), 5)],
        "patched_nodes": len(launcher._nodes),
        "device_updated_nodes": sum(n.on_device for n in launcher._nodes),
        "nodes": len(launcher._capture.snapshot.nodes),
        "pinned": sorted(launcher.pinned),
        "copied": sorted(launcher.copied),  # cheaper to copy than to re-point (update_cost)
        "build_s": round(build_s, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    available = entries()
    results = {}
    for name in args.models.split(","):
        if name not in available:
            results[name] = {"pass": False, "cause": "not available on this machine"}
            continue
        try:
            result = run_one(name, *available[name], args.steps)
        except Exception as error:
            result = {
                "pass": False,
                "cause": f"{type(error).__name__}: {str(error).splitlines()[0][:160]}",
                "where": traceback.format_exc().splitlines()[-3][:160],
            }
        results[name] = result
        print(f"{name:<35} {'PASS' if result['pass'] else 'FAIL'} {json.dumps(result)}", flush=True)
        torch.cuda.empty_cache()
        if args.json:
            _write(args.json, results, args.steps)
    passed = sum(r["pass"] for r in results.values())
    print(f"\n{passed}/{len(results)} training steps bit-identical to the recipe over {args.steps} steps")
    print("\n| model | losses equal | state equal | nodes (patched, device-updated) | pinned |")
    print("|---|---:|---|---:|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r.get('equal_losses', '-')} | {r.get('equal_state', r.get('cause', '-'))} | "
            f"{r.get('nodes', '-')} ({r.get('patched_nodes', '-')}, {r.get('device_updated_nodes', '-')}) | "
            f"{', '.join(r.get('pinned', [])) or '-'} |"
        )
    if args.json:
        _write(args.json, results, args.steps)
    return 0


_PROVENANCE: dict = {}


def _write(path: str, results: dict, steps: int) -> None:
    from graphlint.runtime_sanitizer.capture.introspection import provenance

    if not _PROVENANCE:
        _PROVENANCE.update(provenance())
    with open(path, "w") as handle:
        json.dump(
            {
                **_PROVENANCE,
                "python": platform.python_version(),
                "steps": steps,
                "deterministic_algorithms": True,
                "passed": sum(r["pass"] for r in results.values()),
                "total": len(results),
                "results": results,
            },
            handle,
            indent=1,
        )


if __name__ == "__main__":
    sys.exit(main())
