"""Run the parameterized launcher over a zoo of real architectures (needs CUDA).

Models come from what the GPU machine has installed (torchvision, timm, transformers), built
from configs with random weights, in inference mode, fp32 and bf16. A model passes only when
the launcher's outputs on fresh inputs it never saw equal eager within the stated tolerance
(bit-identical counted separately) and no call fell back. Every failure gets a cause.

    python benchmarks/launcher_zoo.py [--json out.json] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
import warnings

import torch

TOLERANCE = {torch.float32: (1e-3, 1e-3), torch.bfloat16: (2e-2, 2e-2)}


def torchvision_models():
    import torchvision.models as tvm

    names = [
        "resnet18",
        "resnet50",
        "mobilenet_v3_small",
        "efficientnet_b0",
        "regnet_y_400mf",
        "squeezenet1_1",
        "shufflenet_v2_x1_0",
        "densenet121",
        "convnext_tiny",
        "vit_b_16",
        "swin_t",
        "mnasnet0_5",
    ]
    for name in names:
        yield (
            f"torchvision.{name}",
            (lambda n=name: getattr(tvm, n)(weights=None)),
            lambda b: (torch.randn(b, 3, 224, 224),),
        )


def timm_models():
    import timm

    names = [
        "resnet26d",
        "efficientnet_lite0",
        "mobilevitv2_050",
        "deit_tiny_patch16_224",
        "convnext_atto",
        "ghostnet_100",
        "regnetx_002",
        "levit_128s",
        "mixer_s16_224",
        "poolformer_s12",
    ]
    for name in names:
        yield (
            f"timm.{name}",
            (lambda n=name: timm.create_model(n, pretrained=False)),
            lambda b: (torch.randn(b, 3, 224, 224),),
        )


def transformers_models():
    import transformers as tf

    configs = {
        "bert": (tf.BertConfig, tf.BertModel),
        "gpt2": (tf.GPT2Config, tf.GPT2Model),
        "roberta": (tf.RobertaConfig, tf.RobertaModel),
        "distilbert": (tf.DistilBertConfig, tf.DistilBertModel),
        "t5-encoder": (tf.T5Config, tf.T5EncoderModel),
        "llama": (tf.LlamaConfig, tf.LlamaModel),
        "mistral": (tf.MistralConfig, tf.MistralModel),
        "opt": (tf.OPTConfig, tf.OPTModel),
        "electra": (tf.ElectraConfig, tf.ElectraModel),
        "albert": (tf.AlbertConfig, tf.AlbertModel),
    }
    small = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256, vocab_size=1000)
    for name, (config_cls, model_cls) in configs.items():

        def build(c=config_cls, m=model_cls):
            try:
                config = c(**small)
            except TypeError:
                config = c()
            for key, value in small.items():
                if hasattr(config, key):
                    setattr(config, key, value)
            if hasattr(config, "n_embd"):
                config.n_embd, config.n_layer, config.n_head, config.vocab_size = 128, 2, 4, 1000
            if hasattr(config, "d_model"):
                config.d_model, config.num_layers, config.num_heads, config.d_ff, config.d_kv = 128, 2, 4, 256, 32
            if hasattr(config, "num_key_value_heads"):
                config.num_key_value_heads = 4
            config._attn_implementation = "sdpa" if hasattr(config, "_attn_implementation") else None
            return _LastHidden(m(config))

        yield f"transformers.{name}", build, lambda b: (torch.randint(0, 1000, (b, 64)),)


class _LastHidden(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return (
            self.model(input_ids=ids, use_cache=False).last_hidden_state
            if "use_cache" in self.model.forward.__code__.co_varnames
            else self.model(input_ids=ids).last_hidden_state
        )


def inputs_on_device(make_inputs, dtype, batch: int) -> tuple:
    """The model's inputs on the GPU, floating-point ones in ``dtype`` (token ids stay integers)."""
    return tuple(t.cuda().to(dtype) if t.is_floating_point() else t.cuda() for t in make_inputs(batch))


def first_output(out):
    """The tensor the zoo compares: a model's output, or the first of the several it returns."""
    return out if isinstance(out, torch.Tensor) else out[0]


def run_one(name, build, make_inputs, dtype, batch=2):
    from graphlint.launcher.launcher import ParameterizedLauncher

    model = build().cuda().eval()
    if dtype != torch.float32:
        model = model.to(dtype)
    sample = inputs_on_device(make_inputs, dtype, batch)
    with torch.inference_mode():
        model(*sample)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # The zoo measures re-pointing: nothing copied because copying would be cheaper.
            launcher = ParameterizedLauncher(model, sample, copy_when_cheaper=False)
            if launcher.fallback_reason:
                return {"pass": False, "cause": f"fallback: {launcher.fallback_reason}"}
            exact = 0
            rtol, atol = TOLERANCE[dtype]
            for _ in range(3):
                fresh = inputs_on_device(make_inputs, dtype, batch)
                outs = launcher(*fresh)
                expected = first_output(model(*fresh))
                if not torch.allclose(outs[0].float(), expected.float(), rtol=rtol, atol=atol):
                    err = (outs[0].float() - expected.float()).abs().max().item()
                    return {"pass": False, "cause": f"mismatch vs eager, max abs err {err:.3g}"}
                exact += int(torch.equal(outs[0], expected))
            if any("copy-in" in str(w.message) for w in caught):
                return {"pass": False, "cause": "a call fell back: " + str(caught[0].message)}
    return {
        "pass": True,
        "bit_identical": f"{exact}/3",
        "patched_nodes": len(launcher._nodes),
        "device_updated_nodes": sum(node.on_device for node in launcher._nodes),
        "nodes": len(launcher._capture.snapshot.nodes),
        "pinned": sorted(launcher.pinned),  # copied through static buffers, not re-pointed
        "copied": sorted(launcher.copied),  # cheaper to copy than to re-point (update_cost)
        "extra_launched_nodes": sum(node.extra for node in launcher._capture.snapshot.nodes),
        "attributed": launcher._ordering is not None,  # else every output is cloned (UNATTRIBUTED_OUTPUT)
    }


def capture_plainly(model, sample: tuple):
    """PyTorch's recipe: one warm-up on a side stream, then `torch.cuda.graph`. (graph, output)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        model(*sample)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model(*sample)
    return graph, out


def plain_capture(build, make_inputs, dtype, batch=2) -> dict | None:
    """A plain `torch.cuda.graph` capture of the model, as a user would write it: None when it
    captures, else the error and the innermost frames of the library code that raised it."""
    model = build().cuda().eval()
    if dtype != torch.float32:
        model = model.to(dtype)
    sample = inputs_on_device(make_inputs, dtype, batch)
    try:
        with torch.inference_mode():
            capture_plainly(model, sample)
    except Exception as error:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if "site-packages" in f.filename]
        return {
            "error": f"{type(error).__name__}: {str(error).splitlines()[0][:200]}",
            "frames": [f"{f.filename.split('site-packages/')[-1]}:{f.lineno}: {f.line}" for f in frames[-3:]],
            "file": frames[-1].filename if frames else None,
            "line": frames[-1].lineno if frames else None,
        }
    return None


def static_check(path: str, line: int) -> dict:
    """`graphlint check --select GL1` on the library file whose line raised during capture."""
    import subprocess

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "graphlint",
            "check",
            path,
            "--select",
            "GL1",
            "--format",
            "json",
            "--no-cache",
            "--exit-zero",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        findings = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"error": (done.stderr or done.stdout)[-300:]}
    findings = findings if isinstance(findings, list) else findings.get("findings", [])
    lines = [(f.get("code"), f.get("line") or f.get("location", {}).get("row")) for f in findings]
    return {
        "findings": len(findings),
        "gl104_lines": sorted(n for c, n in lines if c == "GL104"),
        "at_line": [c for c, n in lines if n == line],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    args = parser.parse_args()
    zoo = []
    for source in (torchvision_models, timm_models, transformers_models):
        try:
            zoo.extend(source())
        except Exception as error:  # a library missing on this machine
            print(f"skipping {source.__name__}: {error}")
    if args.limit:
        zoo = zoo[: args.limit]
    results = {}
    for name, build, make_inputs in zoo:
        for dtype in [getattr(torch, d) for d in args.dtypes.split(",")]:
            key = f"{name}[{str(dtype).split('.')[-1]}]"
            start = time.perf_counter()
            try:
                result = run_one(name, build, make_inputs, dtype)
            except Exception as error:
                result = {
                    "pass": False,
                    "cause": f"{type(error).__name__}: {str(error).splitlines()[0][:160]}",
                    "where": traceback.format_exc().splitlines()[-3][:160],
                }
                result.update(_capturable(build, make_inputs, dtype))
            result["seconds"] = round(time.perf_counter() - start, 1)
            results[key] = result
            print(
                f"{key:<45} {'PASS' if result['pass'] else 'FAIL'} {result.get('cause', result.get('bit_identical', ''))}"
                + (
                    f" [not capturable: {result['plain_capture']}; {result.get('graphlint_check')}]"
                    if result.get("capturable") is False
                    else ""
                )
                + (
                    f" patched={result['patched_nodes']} device={result['device_updated_nodes']} pinned={result['pinned']}"
                    if result["pass"]
                    else ""
                ),
                flush=True,
            )
            torch.cuda.empty_cache()
            if args.json:  # written as it goes: a run cut short still leaves its results
                _write(args.json, results)
    print()
    for dtype, (passed, capturable, total) in _counts(results).items():
        print(f"{dtype}: {passed}/{capturable} capturable passed ({passed / max(1, capturable):.0%}); {total} in all")
    passed = sum(r["pass"] for r in results.values())
    print(f"{passed}/{len(results)} passed ({passed / max(1, len(results)):.0%})")
    if args.json:
        _write(args.json, results)
    return 0


def _capturable(build, make_inputs, dtype) -> dict:
    """Whether a failure is the model's, not the launcher's: a plain capture in the same run. Only
    a failing plain capture makes the row "not capturable", with the static rule's view of it."""
    try:
        plain = plain_capture(build, make_inputs, dtype)
    except Exception as error:  # building the model itself failed: not a capture question
        return {"plain_capture": f"not tried: {type(error).__name__}: {error}"}
    if plain is None:
        return {"capturable": True, "plain_capture": "ok"}
    found = {"capturable": False, "plain_capture": plain["error"], "frames": plain["frames"]}
    if plain["file"]:
        found["graphlint_check"] = static_check(plain["file"], plain["line"])
    return found


def _counts(results: dict) -> dict:
    """dtype -> (passed, capturable, total)."""
    counts: dict = {}
    for key, result in results.items():
        dtype = key.rsplit("[", 1)[-1].rstrip("]")
        passed, capturable, total = counts.get(dtype, (0, 0, 0))
        counts[dtype] = (
            passed + result["pass"],
            capturable + (result.get("capturable", True) is not False),
            total + 1,
        )
    return counts


def _write(path: str, results: dict) -> None:
    passed = sum(r["pass"] for r in results.values())
    with open(path, "w") as handle:
        json.dump(
            {
                "device": torch.cuda.get_device_name(0),
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "python": platform.python_version(),
                "passed": passed,
                "total": len(results),
                "per_dtype": {
                    d: dict(zip(("passed", "capturable", "total"), c, strict=True)) for d, c in _counts(results).items()
                },
                "results": results,
            },
            handle,
            indent=1,
        )


if __name__ == "__main__":
    sys.exit(main())
