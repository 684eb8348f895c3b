"""gpt-fast's own compiled decode, as issue #32 asks the sanitizer to run it.

gpt-fast (pytorch-labs/gpt-fast) is a repository, not a package: pass the folder that holds its
`model.py` and `generate.py` (carried to the GPU machine in `.peers/gpt-fast`, never committed).
Its `Transformer` is built small from `ModelArgs` with random weights in bfloat16 (no
checkpoint), `decode_one_token` is compiled with `mode="reduce-overhead", fullgraph=True` as
gpt-fast's `main(compile=True)` does, and its `generate()` runs three times on a fixed prompt
(the first compiles and records the cudagraph trees' graphs, the next two replay them), with
gpt-fast's own top-k sampling. Its tokenizer module is not imported: nothing here encodes text.
Writes the sequences, so a plain run and a run under `graphlint sanitize` (and `--poison`) can be
compared bit for bit: `bash scripts/check_gpt_fast.sh OUTDIR`.

    python scripts/gpt_fast_decode_program.py GPT_FAST_DIR OUT.pt
"""

from __future__ import annotations

import os
import sys
import types

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch


def _gpt_fast(folder: str) -> tuple[types.ModuleType, types.ModuleType]:
    """gpt-fast's `generate` and `model` modules, imported from its folder."""
    sys.path.insert(0, os.path.abspath(folder))
    tokenizer = types.ModuleType("tokenizer")  # needs sentencepiece and tiktoken; unused here
    tokenizer.get_tokenizer = None  # type: ignore[attr-defined]
    sys.modules.setdefault("tokenizer", tokenizer)
    import generate
    import model

    return generate, model


def main(folder: str, out: str) -> int:
    generate, model = _gpt_fast(folder)
    torch.manual_seed(0)
    args = model.ModelArgs(block_size=64, vocab_size=256, n_layer=2, n_head=4, dim=64, intermediate_size=128)
    transformer = model.Transformer(args).to(device="cuda", dtype=torch.bfloat16).eval()
    generate.decode_one_token = torch.compile(generate.decode_one_token, mode="reduce-overhead", fullgraph=True)
    prompt = torch.randint(0, 256, (8,), device="cuda")
    sequences = []
    with torch.no_grad():
        for _ in range(3):
            seq, _ = generate.generate(
                transformer, prompt, 16, batch_size=2, interactive=False, draft_model=None, temperature=0.8, top_k=20
            )
            sequences.append(seq.clone())
    torch.cuda.synchronize()
    print("sequences:", [s[0, 8:].tolist() for s in sequences])
    torch.save({"sequences": torch.stack(sequences).cpu()}, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
