"""Hugging Face `generate()` with a static KV cache, as issue #32 asks the sanitizer to run it.

A small Llama built from a config with random weights (nothing from a hub), greedy decoding of
16 tokens for a batch of 2 prompts with `cache_implementation="static"`: recent transformers
compile the decoding forward with `torch.compile(mode="reduce-overhead")`, so the decode steps
replay CUDA graphs from cudagraph trees. Writes the tokens, so a plain run and a run under
`graphlint sanitize` can be compared bit for bit: `bash scripts/check_hf_generate.sh OUTDIR`.

    python scripts/hf_generate_program.py OUT.pt
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch


def main(out: str) -> int:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    model = LlamaForCausalLM(config).cuda().eval()
    prompt = torch.randint(0, 256, (2, 8), device="cuda")
    with torch.no_grad():
        tokens = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=16,
            do_sample=False,
            cache_implementation="static",
            pad_token_id=0,
        )
    torch.save(tokens.cpu(), out)
    print(f"generated {tokens.shape[1] - prompt.shape[1]} tokens per prompt: {tokens[0, -8:].tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
