"""Three small real-world CUDA-graph programs, written for graphlint's runtime checks (issue 18).

    python scripts/real_programs.py --program decode|cudagraphmodule|graphed_training --out FILE

Each program is deterministic (fixed seeds, deterministic algorithms, cuBLAS workspace config)
and saves its outputs with ``torch.save`` to FILE, so two plain runs can be compared bit for
bit, and then a plain run against one under ``graphlint sanitize`` (the sanitizer must never
change results). ``scripts/check_real_programs.sh`` does exactly that.

- ``decode``: a gpt-fast-style greedy decode loop: a tiny random-weight transformer (2 layers,
  dim 64) with static KV-cache buffers, an eager prefill, then 16 greedy steps of
  ``decode_one_token`` compiled with ``torch.compile(mode="reduce-overhead")`` (CUDA graph
  trees). Saves the token ids and the final step's logits.
- ``cudagraphmodule``: tensordict's ``CudaGraphModule`` around a small ``TensorDictModule``,
  called on several fresh inputs; each output is cloned before the next call.
- ``graphed_training``: ``torch.cuda.make_graphed_callables`` on a small MLP, trained 10 steps
  with a capturable Adam and ``zero_grad(set_to_none=True)`` every step. Saves the losses and
  the final parameters.

``--device cpu`` is only for a smoke test on a machine without a GPU (no graphs are captured).
"""

from __future__ import annotations

import os

# cuBLAS reads this when it creates its workspace; set it before torch is imported.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

SEED = 1234


def _deterministic(seed: int = SEED) -> None:
    torch.manual_seed(seed)
    # warn_only: an op without a deterministic implementation warns (in the log) instead of
    # failing the run; the run-to-run comparison is the proof either way.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


# --------------------------------------------------------------------------------------------
# (a) gpt-fast-style greedy decoding with a static KV cache and a reduce-overhead compile
# --------------------------------------------------------------------------------------------


class StaticKVCache(nn.Module):
    """Preallocated keys and values; each step writes its position in place."""

    def __init__(self, batch: int, heads: int, max_len: int, head_dim: int):
        super().__init__()
        shape = (batch, heads, max_len, head_dim)
        self.register_buffer("keys", torch.zeros(shape))
        self.register_buffer("values", torch.zeros(shape))

    def write(self, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        self.keys[:, :, positions] = k
        self.values[:, :, positions] = v
        return self.keys, self.values


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.scale


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding, the rotate-half form. x: (B, H, T, D); cos, sin: (T, D/2)."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.attn_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.gate = nn.Linear(dim, 2 * dim, bias=False)
        self.up = nn.Linear(dim, 2 * dim, bias=False)
        self.down = nn.Linear(2 * dim, dim, bias=False)
        self.cache: StaticKVCache | None = None

    def forward(self, x, positions, cos, sin, mask):
        batch, length, dim = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).split(dim, dim=-1)
        q, k, v = (t.view(batch, length, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        k, v = self.cache.write(positions, k, v)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, dim))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int = 256, dim: int = 64, layers: int = 2, heads: int = 4, max_len: int = 64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        head_dim = dim // heads
        inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(max_len).float(), inv_freq)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))
        self.max_len, self.heads, self.head_dim = max_len, heads, head_dim

    def setup_caches(self, batch: int) -> None:
        device = self.head.weight.device
        for block in self.blocks:
            block.cache = StaticKVCache(batch, self.heads, self.max_len, self.head_dim).to(device)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        mask = self.causal[None, None, positions]
        cos, sin = self.cos[positions], self.sin[positions]
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, positions, cos, sin, mask)
        return self.head(self.norm(x))


def _greedy(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    last = logits[:, -1]
    return last.argmax(dim=-1, keepdim=True).to(torch.int), last


def prefill(model: TinyTransformer, prompt: torch.Tensor, positions: torch.Tensor):
    return _greedy(model(prompt, positions))


def decode_one_token(model: TinyTransformer, x: torch.Tensor, input_pos: torch.Tensor):
    return _greedy(model(x, input_pos))


@torch.no_grad()
def run_decode(device: str) -> dict[str, torch.Tensor]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    _deterministic()
    model = TinyTransformer().to(device).eval()
    model.setup_caches(batch=1)
    prompt_len, new_tokens = 8, 16
    prompt = torch.randint(0, 256, (1, prompt_len), device=device)
    decode = torch.compile(decode_one_token, mode="reduce-overhead", fullgraph=True)

    with sdpa_kernel(SDPBackend.MATH):
        token, _ = prefill(model, prompt, torch.arange(prompt_len, device=device))  # eager
    tokens = [token.clone()]
    input_pos = torch.tensor([prompt_len], device=device, dtype=torch.int)
    last_logits = None
    for _ in range(new_tokens):
        with sdpa_kernel(SDPBackend.MATH):
            next_token, logits = decode(model, token, input_pos)
        input_pos += 1
        # Graph outputs are overwritten by the next replay: keep copies, as gpt-fast does.
        token = next_token.clone()
        tokens.append(token)
        last_logits = logits.clone()
    return {
        "prompt": prompt.cpu(),
        "tokens": torch.cat(tokens, dim=1).cpu(),
        "final_logits": last_logits.cpu(),
    }


# --------------------------------------------------------------------------------------------
# (b) tensordict's CudaGraphModule around a TensorDictModule
# --------------------------------------------------------------------------------------------


@torch.no_grad()
def run_cudagraphmodule(device: str) -> dict[str, torch.Tensor]:
    from tensordict import TensorDict
    from tensordict.nn import CudaGraphModule, TensorDictModule

    _deterministic()
    net = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4)).to(device)
    policy = TensorDictModule(net, in_keys=["observation"], out_keys=["action"])
    graphed = CudaGraphModule(policy, warmup=2)
    generator = torch.Generator().manual_seed(SEED + 1)
    actions, observations = [], []
    for _ in range(8):  # 2 warm-up calls, the capture, then replays
        observation = torch.randn(8, 16, generator=generator).to(device)
        td = TensorDict(observation=observation, batch_size=[8], device=device)
        out = graphed(td)
        # The replayed output aliases the graph's static buffer: copy it before the next call.
        actions.append(out["action"].clone())
        observations.append(observation.clone())
    keyword = graphed(observation=torch.randn(8, 16, generator=generator).to(device))
    return {
        "observations": torch.stack(observations).cpu(),
        "actions": torch.stack(actions).cpu(),
        "keyword_call": keyword.clone().cpu() if isinstance(keyword, torch.Tensor) else keyword["action"].clone().cpu(),
    }


# --------------------------------------------------------------------------------------------
# (c) make_graphed_callables training with a capturable Adam
# --------------------------------------------------------------------------------------------


def run_graphed_training(device: str) -> dict[str, torch.Tensor]:
    _deterministic()
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, capturable=(device != "cpu"))
    generator = torch.Generator().manual_seed(SEED + 2)
    batches = [(torch.randn(16, 32, generator=generator), torch.randn(16, 8, generator=generator)) for _ in range(10)]
    sample = torch.randn(16, 32, generator=generator).to(device)
    if device != "cpu":
        model = torch.cuda.make_graphed_callables(model, (sample,))
    losses = []
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().clone())
    params = {name: p.detach().clone().cpu() for name, p in model.named_parameters()}
    return {"losses": torch.stack(losses).cpu(), **{f"param.{k}": v for k, v in params.items()}}


PROGRAMS = {"decode": run_decode, "cudagraphmodule": run_cudagraphmodule, "graphed_training": run_graphed_training}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", required=True, choices=sorted(PROGRAMS))
    parser.add_argument("--out", required=True, help="torch.save the outputs here")
    parser.add_argument("--device", default="cuda", help="cuda (default); cpu only for a smoke test")
    args = parser.parse_args(argv)
    outputs = PROGRAMS[args.program](args.device)
    if args.device != "cpu":
        torch.cuda.synchronize()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    torch.save(outputs, args.out)
    described = ", ".join(f"{k} {tuple(v.shape)} {str(v.dtype).removeprefix('torch.')}" for k, v in outputs.items())
    print(f"{args.program}: saved {args.out}: {described}")
    if "tokens" in outputs:
        print(f"{args.program}: tokens {outputs['tokens'].tolist()}")
    if "losses" in outputs:
        print(f"{args.program}: losses {[round(v, 6) for v in outputs['losses'].tolist()]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
