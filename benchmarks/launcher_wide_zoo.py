"""The launcher zoo at the scale of PyTorch's parameterized-launch prototype (issue #34; needs CUDA).

launcher_zoo.py runs 32 hand-picked architectures. This widens it to what the GPU machine's
libraries hold, enumerated there so that every name exists: torchvision's classification
models, a fixed list of timm families (kept if `timm.is_model` knows them) and transformers
encoder and decoder types built by `AutoConfig.for_model` at a small size, all from configs with
random weights. Each is run as launcher_zoo.py runs one (`run_one`: fresh inputs the build never
saw, against eager, within tolerance, bit-identical counted apart), in float32 and bfloat16, and
scored as the prototype is: the denominator is the models a plain `torch.cuda.graph` capture
takes. A passing row also gets, side by side in one process:

- per-call GPU latency from an idle device, GPU busy time (the host out of the way,
  `launcher_speed.busy`) and CPU time of the launcher and of copy-in / replay / clone-out
  (medians of interleaved calls, `launcher_speed.measure`);
- the pool bytes of the launcher's graph and of the copy path's (inputs and outputs included),
  and the memory each path holds while its graph lives: the pool and the static inputs it
  keeps (the launcher frees those it re-points).

`--costs-only` skips the pass/fail scoring and only times each row (`benchmarks/zoo_table.py`
lays those times over the verdicts of an earlier full run, and drops rows that run did not
pass); `--stride K` takes every K-th model of the slice, for a sample that fits one device call.

A model over `--max-params` (default 100M) is listed as skipped with its size, never as a
failure. `--offset` and `--limit` split the zoo over several runs (a device call is limited to
ten minutes); each writes its own JSON.

    python benchmarks/launcher_wide_zoo.py --list                   # what would run here
    python benchmarks/launcher_wide_zoo.py --json out.json [--offset 0 --limit 60]
    python benchmarks/launcher_wide_zoo.py --only timm.levit_128s --dtypes bfloat16   # one row again
    python benchmarks/launcher_wide_zoo.py --costs-only --stride 8 --json times.json  # re-time a sample
    python benchmarks/launcher_wide_zoo.py --costs-only --same-graph --json t.json   # and on the launcher's graph
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(__file__))
import launcher_zoo as zoo

TIMM_NAMES = [
    "resnet10t",
    "resnet14t",
    "resnet18d",
    "resnet34",
    "resnet50d",
    "seresnet18",
    "resnext26ts",
    "regnety_002",
    "regnety_004",
    "regnetz_b16",
    "efficientnet_b0",
    "efficientnet_es",
    "tf_efficientnet_lite0",
    "mobilenetv2_050",
    "mobilenetv2_100",
    "mobilenetv3_small_050",
    "mobilenetv3_large_100",
    "mobilenetv4_conv_small",
    "lcnet_050",
    "lcnet_100",
    "mnasnet_050",
    "fbnetc_100",
    "spnasnet_100",
    "ghostnetv2_100",
    "hardcorenas_a",
    "tinynet_a",
    "tinynet_e",
    "rexnet_100",
    "dla34",
    "dpn48b",
    "cspresnet50",
    "cspdarknet53",
    "darknet17",
    "vovnet39a",
    "densenet121",
    "hrnet_w18_small",
    "dm_nfnet_f0",
    "nf_resnet26",
    "repvgg_a0",
    "repghostnet_050",
    "mobileone_s0",
    "fastvit_t8",
    "efficientformer_l1",
    "efficientvit_b0",
    "edgenext_xx_small",
    "coatnet_nano_rw_224",
    "maxvit_nano_rw_256",
    "convnextv2_atto",
    "vit_tiny_patch16_224",
    "vit_small_patch16_224",
    "deit_small_patch16_224",
    "cait_xxs24_224",
    "xcit_nano_12_p16_224",
    "pit_ti_224",
    "tnt_s_patch16_224",
    "twins_svt_small",
    "swin_tiny_patch4_window7_224",
    "crossvit_tiny_240",
    "beit_base_patch16_224",
    "convmixer_768_32",
    "resmlp_12_224",
    "gmlp_ti16_224",
    "poolformerv2_s12",
    "sequencer2d_s",
    "visformer_tiny",
    "levit_128",
    "mobilevit_xxs",
    "inception_v3",
    "xception41",
    "selecsls42b",
    "res2net50_14w_8s",
    "skresnet18",
]
TRANSFORMER_TYPES = [
    "bert",
    "roberta",
    "distilbert",
    "albert",
    "electra",
    "deberta",
    "deberta-v2",
    "mpnet",
    "xlm-roberta",
    "camembert",
    "ernie",
    "nystromformer",
    "gpt_bigcode",
    "squeezebert",
    "convbert",
    "mobilebert",
    "layoutlm",
    "megatron-bert",
    "roformer",
    "data2vec-text",
    "gpt2",
    "gpt_neo",
    "gptj",
    "gpt_neox",
    "opt",
    "bloom",
    "llama",
    "mistral",
    "qwen2",
    "phi",
    "phi3",
    "gemma",
    "gemma2",
    "falcon",
    "stablelm",
    "starcoder2",
    "olmo",
    "codegen",
    "biogpt",
    "xglm",
]
_SMALL = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256, vocab_size=1000)
_SMALL_ALIASES = {  # fields a type names otherwise, or needs to agree with the small size
    "squeezebert": {"embedding_size": 128},
    "gptj": {"rotary_dim": 16},
    "codegen": {"rotary_dim": 16},
}


def _set(config, key: str, value) -> None:
    """Set a config field where the config has it and lets it be set (some are properties)."""
    if hasattr(config, key):
        with contextlib.suppress(AttributeError, NotImplementedError):
            setattr(config, key, value)


def wide_zoo() -> list[tuple]:
    """(name, build, make_inputs) for every model this machine's libraries hold, in a fixed order."""
    found = []
    for source in (zoo.torchvision_models, zoo.timm_models, zoo.transformers_models, _torchvision, _timm, _hf):
        try:
            found.extend(source())
        except Exception as error:  # a library missing on this machine
            print(f"skipping {source.__name__}: {error}")
    unique: dict[str, tuple] = {}
    for entry in found:
        unique.setdefault(entry[0], entry)
    return list(unique.values())


def _images(batch: int) -> tuple:
    return (torch.randn(batch, 3, 224, 224),)


def _torchvision() -> list[tuple]:
    import torchvision.models as tvm

    names = [n for n in tvm.list_models(module=tvm) if not n.startswith(("vit_h", "regnet_y_128", "regnet_y_32"))]
    return [(f"torchvision.{n}", (lambda n=n: tvm.get_model(n, weights=None)), _images) for n in sorted(names)]


def _timm() -> list[tuple]:
    import timm

    def inputs_for(name):
        size = timm.get_pretrained_cfg_value(name, "input_size") or (3, 224, 224)
        return lambda batch: (torch.randn(batch, *size),)

    return [
        (f"timm.{n}", (lambda n=n: timm.create_model(n, pretrained=False)), inputs_for(n))
        for n in TIMM_NAMES
        if timm.is_model(n)
    ]


def _hf() -> list[tuple]:
    import transformers as tf

    entries = []
    for model_type in TRANSFORMER_TYPES:

        def build(t=model_type):
            config = tf.AutoConfig.for_model(t)
            for key, value in {**_SMALL, **_SMALL_ALIASES.get(t, {})}.items():
                _set(config, key, value)
            for key in ("num_key_value_heads", "n_head_kv"):
                _set(config, key, _SMALL["num_attention_heads"])
            _set(config, "head_dim", _SMALL["hidden_size"] // _SMALL["num_attention_heads"])
            if getattr(config, "pad_token_id", None) is not None:
                config.pad_token_id = 0  # inside the small vocabulary
            try:
                model = tf.AutoModel.from_config(config, attn_implementation="sdpa")
            except ValueError:  # no SDPA attention for this architecture: its own
                model = tf.AutoModel.from_config(config, attn_implementation="eager")
            return zoo._LastHidden(model)

        entries.append((f"transformers.{model_type}", build, lambda b: (torch.randint(0, 1000, (b, 64)),)))
    return entries


def copy_path(model, static: tuple):
    """A plain capture on `static`, and PyTorch's recipe around it (copy the inputs in, replay,
    clone the output out): what the launcher is measured against."""
    graph, static_out = zoo.capture_plainly(model, static)
    static_out = zoo.first_output(static_out)

    def replay(inputs):
        for mine, theirs in zip(static, inputs, strict=True):
            mine.copy_(theirs)
        graph.replay()
        return static_out.clone()

    return graph, replay


def launcher_keeping_inputs(model, sample):
    """A launcher whose build keeps alive the static input buffers it frees (benchmark only):
    its graph template still reads them, and `copy_on_launcher_graph` replays a clone of it."""
    from graphlint.launcher.launcher import ParameterizedLauncher

    class Keeping(ParameterizedLauncher):
        def _release_static_inputs(self) -> int:
            self.kept_static_inputs = list(self.inputs)
            return super()._release_static_inputs()

    return Keeping(model, sample)


def copy_on_launcher_graph(launcher):
    """PyTorch's recipe (copy in, replay, clone out) on the launcher's own kernels: a clone of
    its graph template, instantiated apart (a template with device-updatable kernel nodes can be
    instantiated only once) and launched on the current stream. The template is never updated
    (host-side updates go to the launcher's executable graph, device-side ones to its device
    copy), so its nodes read the static inputs and write the static outputs of the capture.
    Against this, the launcher's per-call cost is its method's alone: two captures of one model
    pick different kernels (the `--aa` runs measured up to 2.4% of GPU busy time), one graph
    cloned does not."""
    from graphlint.runtime_sanitizer import driver

    drv = driver.bindings()
    template = drv.CUgraph(launcher._capture.graph.raw_cuda_graph())
    clone = driver.ok(drv.cuGraphClone(template))
    executable = driver.ok(drv.cuGraphInstantiate(clone, 0))
    static_inputs, static_outputs = launcher.kept_static_inputs, launcher.outputs

    def replay(inputs):
        for mine, theirs in zip(static_inputs, inputs, strict=True):
            mine.copy_(theirs)
        driver.ok(drv.cuGraphLaunch(executable, drv.CUstream(torch.cuda.current_stream().cuda_stream)))
        return [t.clone() for t in static_outputs]

    def close() -> None:
        torch.cuda.synchronize()
        driver.ok(drv.cuGraphExecDestroy(executable))
        driver.ok(drv.cuGraphDestroy(clone))

    return replay, close


def costs(build, make_inputs, dtype, batch: int = 2, aa: bool = False, same_graph: bool = False) -> dict:
    """Per-call GPU/CPU time and pool bytes: the launcher against copy-in / replay / clone-out.
    With ``aa``, the copy path is also timed against itself, interleaved with the other two:
    ``copy_again`` replays the same graph (the clock's noise) and ``copy_recaptured`` a second
    capture of the same model (the noise plus the kernels a capture happens to pick, which the
    launcher's own capture is subject to as well), so a row's launcher/copy ratio can be read
    against the ratios that no difference in method gives on the same row. With ``same_graph``,
    ``copy_launcher_graph`` times the copy recipe on a clone of the launcher's own graph
    (`copy_on_launcher_graph`): the same kernels, so only the method differs."""
    import launcher_speed

    from graphlint.launcher.launcher import ParameterizedLauncher

    model = build().cuda().eval().to(dtype)
    pool = [zoo.inputs_on_device(make_inputs, dtype, batch) for _ in range(4)]
    with torch.inference_mode():
        static = tuple(t.clone() for t in pool[0])
        graph, replay = copy_path(model, static)
        launcher = launcher_keeping_inputs(model, pool[0]) if same_graph else ParameterizedLauncher(model, pool[0])
        launcher_speed.ITERS = 30
        variants = {"copy": replay, "launcher": lambda x: launcher(*x)}
        close, unmeasured = None, {}
        if same_graph:
            try:
                variants["copy_launcher_graph"], close = copy_on_launcher_graph(launcher)
            except Exception as error:  # the row keeps its other times, and says why it has none
                unmeasured["copy_launcher_graph"] = f"not measured: {type(error).__name__}: {str(error)[:120]}"
        if aa:
            variants["copy_again"] = replay
            variants["copy_recaptured"] = copy_path(model, tuple(t.clone() for t in pool[0]))[1]
        try:
            timed = launcher_speed.measure(variants, pool)
        finally:
            if close is not None:
                close()
    copy_pool = launcher_speed.graph_pool_mib(graph)
    launcher_pool = round(launcher._capture.pool_bytes / 2**20, 2)
    kept_inputs = [t for t in launcher.inputs if t is not None]
    again = {
        f"{variant}_{k}": v
        for variant in ("copy_again", "copy_recaptured", "copy_launcher_graph")
        for k, v in timed.get(variant, {}).items()
        if k != "peak_extra_mib"
    }
    return {
        **again,
        **unmeasured,
        "copy_gpu_us": timed["copy"]["gpu_us"],
        "copy_cpu_us": timed["copy"]["cpu_us"],
        "copy_busy_us": timed["copy"]["busy_us"],
        "launcher_gpu_us": timed["launcher"]["gpu_us"],
        "launcher_cpu_us": timed["launcher"]["cpu_us"],
        "launcher_busy_us": timed["launcher"]["busy_us"],
        "copy_host_us": timed["copy"]["host_us"],
        "launcher_host_us": timed["launcher"]["host_us"],
        "copy_pool_mib": copy_pool,
        "launcher_pool_mib": launcher_pool,
        # what each path holds while the graph lives: its pool and the static inputs it keeps
        "copy_held_mib": round(copy_pool + _mib(static), 3),
        "launcher_held_mib": round(launcher_pool + _mib(kept_inputs), 3),
    }


def _mib(tensors) -> float:
    return sum(t.untyped_storage().nbytes() for t in tensors) / 2**20


def divergence(build, make_inputs, dtype, batch: int = 2, calls: int = 3) -> dict:
    """Why a capturable row differs from eager, with no launcher involved: whether eager itself
    gives NaN or infinity on fresh inputs, and where PyTorch's own recipe (copy in, replay)
    gives a non-finite value eager does not. The launcher's self-check fails a call only on the
    second kind, so this tells a graph that goes NaN on its own from one the launcher broke
    (issue #34: levit_128s in bfloat16 passed the self-check and then gave NaN)."""
    model = build().cuda().eval().to(dtype)
    static = zoo.inputs_on_device(make_inputs, dtype, batch)
    eager_nonfinite, graph_only_nonfinite, worst = 0, 0, 0.0
    with torch.inference_mode():
        graph, static_out = zoo.capture_plainly(model, static)
        for _ in range(calls):
            fresh = zoo.inputs_on_device(make_inputs, dtype, batch)
            for mine, theirs in zip(static, fresh, strict=True):
                mine.copy_(theirs)
            graph.replay()
            replayed = zoo.first_output(static_out).float().clone()  # the next replay overwrites it
            expected = zoo.first_output(model(*fresh)).float()
            finite = torch.isfinite(expected)
            eager_nonfinite += int(not bool(finite.all()))
            graph_only_nonfinite += int((finite & ~torch.isfinite(replayed)).sum())
            both = finite & torch.isfinite(replayed)
            if bool(both.any()):
                worst = max(worst, (replayed[both] - expected[both]).abs().max().item())
    return {
        "eager_nonfinite_calls": f"{eager_nonfinite}/{calls}",
        "plain_graph_nonfinite_where_eager_finite": graph_only_nonfinite,
        "plain_graph_max_abs_err_where_both_finite": worst,
    }


def timed_row(build, make_inputs, dtype, aa: bool = False, same_graph: bool = False) -> dict:
    """`--costs-only`: the times and memory of `costs`, no verdict (`zoo_table.merged` lays
    them over the verdict an earlier run gave the row)."""
    try:
        return {"timed_only": True, **costs(build, make_inputs, dtype, aa=aa, same_graph=same_graph)}
    except Exception as error:
        return {"timed_only": True, "costs": f"not measured: {type(error).__name__}: {str(error)[:120]}"}


def run_row(
    name,
    build,
    make_inputs,
    dtype,
    max_params: int,
    costs_only: bool = False,
    aa: bool = False,
    same_graph: bool = False,
) -> dict:
    size = sum(p.numel() for p in build().parameters())
    if size > max_params:
        return {"pass": None, "skipped": f"{size / 1e6:.0f}M parameters, over the zoo's cap"}
    if costs_only:
        return timed_row(build, make_inputs, dtype, aa, same_graph)
    try:
        result = zoo.run_one(name, build, make_inputs, dtype)
    except Exception as error:
        result = {"pass": False, "cause": f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"}
        result["where"] = traceback.format_exc().splitlines()[-3][:160]
    if not result["pass"]:
        result.update(zoo._capturable(build, make_inputs, dtype))
        if result.get("capturable") and "mismatch vs eager" in result.get("cause", ""):
            try:
                result["divergence"] = divergence(build, make_inputs, dtype)
            except Exception as error:  # a diagnosis: the row stays failed either way
                result["divergence"] = f"not measured: {type(error).__name__}: {str(error)[:120]}"
        return result
    try:
        result.update(costs(build, make_inputs, dtype, aa=aa, same_graph=same_graph))
    except Exception as error:  # timing is extra: a pass stays a pass, the row says why it has none
        result["costs"] = f"not measured: {type(error).__name__}: {str(error)[:120]}"
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json")
    parser.add_argument("--list", action="store_true", help="print the zoo and stop")
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--only", default="", help="comma-separated names: run just these (a row's rerun)")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--max-params", type=int, default=100_000_000)
    parser.add_argument("--costs-only", action="store_true", help="re-time rows, give no verdict")
    parser.add_argument("--stride", type=int, default=1, help="every STRIDE-th model of the slice")
    parser.add_argument(
        "--aa",
        action="store_true",
        help="also time the copy path against itself: its own graph again, and a second capture",
    )
    parser.add_argument(
        "--same-graph",
        action="store_true",
        help="also time the copy recipe on a clone of the launcher's own graph (the same kernels)",
    )
    args = parser.parse_args()
    entries = wide_zoo()
    if args.list:
        print("\n".join(name for name, _, _ in entries) + f"\n{len(entries)} models")
        return 0
    entries = entries[args.offset : args.offset + args.limit if args.limit else None : args.stride]
    if args.only:
        wanted = set(args.only.split(","))
        entries = [entry for entry in entries if entry[0] in wanted]
    results = {}
    for name, build, make_inputs in entries:
        for dtype in [getattr(torch, d) for d in args.dtypes.split(",")]:
            key, start = f"{name}[{str(dtype).split('.')[-1]}]", time.perf_counter()
            results[key] = run_row(
                name, build, make_inputs, dtype, args.max_params, args.costs_only, args.aa, args.same_graph
            )
            results[key]["seconds"] = round(time.perf_counter() - start, 1)
            row = results[key]
            verdict = "TIMED" if row.get("timed_only") else {None: "SKIP", True: "PASS", False: "FAIL"}[row["pass"]]
            print(
                f"{key:<50} {verdict} {row.get('cause') or row.get('skipped') or row.get('bit_identical', '')}",
                flush=True,
            )
            torch.cuda.empty_cache()
            if args.json:
                _write(args.json, results)
    return 0


def _write(path: str, results: dict) -> None:
    scored = {k: r for k, r in results.items() if r.get("pass") is not None}
    with open(path, "w") as handle:
        json.dump(
            {
                "device": torch.cuda.get_device_name(0),
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "per_dtype": {
                    d: dict(zip(("passed", "capturable", "total"), c, strict=True))
                    for d, c in zoo._counts(scored).items()
                },
                "results": results,
            },
            handle,
            indent=1,
        )


if __name__ == "__main__":
    sys.exit(main())
