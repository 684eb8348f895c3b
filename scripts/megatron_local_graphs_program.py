"""Megatron-core's local CUDA graphs (`cuda_graph_impl="local"`), as issue #32 asks the sanitizer
to run them, on one GPU.

A 2-layer GPT from megatron-core's local layer specs (no TransformerEngine), random weights,
wrapped in Megatron's DistributedDataParallel (one rank: its contiguous `main_grad` buffers
are what the captured backward accumulates into), trained for a few steps on fixed random
tokens with plain SGD on `main_grad`. Each transformer layer gets a `CudaGraphManager`: after
`cuda_graph_warmup_steps` eager steps its forward and backward are recorded,
`create_cudagraphs()` captures them all into one shared pool, and later steps replay them.
Dropout stays on, through Megatron's cudagraph-safe RNG tracker, so the graphs draw random
numbers. Writes the losses and final weights, so a plain run and a run under `graphlint
sanitize` can be compared bit for bit: `bash scripts/check_megatron_local.sh OUTDIR`.

    python scripts/megatron_local_graphs_program.py OUT.pt
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29517")

import torch

STEPS = 8
SEQ, BATCH, VOCAB = 32, 2, 128


def _model() -> torch.nn.Module:
    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    from megatron.core.transformer.transformer_config import TransformerConfig

    torch.distributed.init_process_group("nccl", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    torch.manual_seed(0)
    model_parallel_cuda_manual_seed(123, use_cudagraphable_rng=True, force_reset_rng=True)
    config = TransformerConfig(
        num_layers=2,
        hidden_size=64,
        num_attention_heads=4,
        use_cpu_initialization=True,
        cuda_graph_impl="local",
        hidden_dropout=0.1,
        attention_dropout=0.1,
    )
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig

    spec = get_gpt_layer_local_spec()
    model = GPTModel(config, spec, vocab_size=VOCAB, max_sequence_length=SEQ).cuda()
    return DistributedDataParallel(config, DistributedDataParallelConfig(), model)


def _train(model: torch.nn.Module) -> list[torch.Tensor]:
    from megatron.core.transformer.cuda_graphs import _CudagraphGlobalRecord, create_cudagraphs

    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator).cuda()
    labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator).cuda()
    positions = torch.arange(SEQ).unsqueeze(0).expand(BATCH, -1).cuda()
    mask = torch.tril(torch.ones(1, 1, SEQ, SEQ, dtype=torch.bool)).logical_not().cuda()
    losses = []
    model.train()
    for _ in range(STEPS):
        model.zero_grad_buffer()
        loss = model(tokens, positions, mask, labels=labels).float().mean()
        loss.backward()
        model.finish_grad_sync()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.main_grad, alpha=-0.05)
        losses.append(loss.detach().clone())
        if _CudagraphGlobalRecord.cudagraph_record and not _CudagraphGlobalRecord.cudagraph_created:
            create_cudagraphs()  # the layers recorded this step: captured, replayed from the next
    print("graphs created:", _CudagraphGlobalRecord.cudagraph_created, "losses:", [round(float(x), 5) for x in losses])
    return losses


def main(out: str) -> int:
    model = _model()
    losses = _train(model)
    torch.cuda.synchronize()
    weights = {name: p.detach().cpu() for name, p in model.named_parameters()}
    torch.save({"losses": torch.stack(losses).cpu(), "weights": weights}, out)
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
