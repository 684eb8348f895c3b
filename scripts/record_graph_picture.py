"""Record a picture of a real captured graph: a transformer block with a side-stream hazard.

    python scripts/record_graph_picture.py OUT_DIR

Needs a CUDA device, torch and cuda-bindings (`pip install -e '.[runtime]'`). A side stream
writes a scratch buffer that the main stream reads before the streams join: a race on every
replay (GL504). The script runs the sanitizer's two-capture analysis on the block and writes,
under OUT_DIR:

- transformer_block_side_stream.svg / .html: the graph, hazards in colour (for the README)
- transformer_block_side_stream.snapshot.json: the analysed graph (re-renderable on CPU)
- transformer_block_side_stream.findings.json: the findings
- transformer_block_side_stream.png: a headless chromium screenshot, when chromium is installed

It runs once, so each step says what it did and a failure names the step.
"""

from __future__ import annotations

import json
import platform
import sys
import traceback
from pathlib import Path

NAME = "transformer_block_side_stream"


def build(torch):
    """The block, its input, and a step whose side stream races the main stream."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, dim: int = 256, heads: int = 4) -> None:
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x):
            h = self.norm1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.norm2(x))

    torch.manual_seed(0)
    block = Block().cuda().eval()
    x = torch.randn(2, 64, 256, device="cuda")
    side = torch.cuda.Stream()
    scratch = torch.zeros(2, 64, 256, device="cuda")

    def step(inp):
        h = block(inp)
        side.wait_stream(torch.cuda.current_stream())  # fork: the side stream sees h
        with torch.cuda.stream(side):
            scratch.copy_(h * 0.5)  # the side stream writes scratch ...
        out = h + scratch  # ... the main stream reads it before the join: a race
        torch.cuda.current_stream().wait_stream(side)  # join (too late for the read above)
        return out

    return block, x, step


def record(out_dir: Path) -> int:
    import torch

    from graphlint.runtime_sanitizer.api import sanitize_callable

    if not torch.cuda.is_available():
        print("record_graph_picture: no CUDA device", file=sys.stderr)
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    block, x, step = build(torch)
    print(f"step 1/4: analysing on {torch.cuda.get_device_name()} (torch {torch.__version__})")
    with torch.no_grad():
        report = sanitize_callable(step, x, module=block)
    codes = [f.code for f in report.findings]
    print(f"step 2/4: findings {codes}")
    svg, html = report.write_pictures(out_dir, NAME)
    print(f"step 3/4: wrote {svg} and {html}")
    graph = report.graph.to_dict()
    graph["provenance"] = {**graph.get("provenance", {}), "script": "scripts/record_graph_picture.py"}
    (out_dir / f"{NAME}.snapshot.json").write_text(json.dumps(graph, indent=1) + "\n")
    findings = [f.to_dict() for f in report.findings]
    (out_dir / f"{NAME}.findings.json").write_text(json.dumps(findings, indent=1) + "\n")
    _screenshot(html, out_dir / f"{NAME}.png")
    if "GL504" not in codes:
        print("record_graph_picture: WARNING: no GL504 found; the picture shows no race", file=sys.stderr)
        return 1
    return 0


def _screenshot(html: Path, png: Path) -> None:
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from screenshot_graph_picture import screenshot

        screenshot(html, png, "1400,1800")
        print(f"step 4/4: screenshot {png}")
    except Exception as error:  # optional: the SVG and HTML are what matter
        print(f"step 4/4: no screenshot ({error})")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        return record(Path(sys.argv[1]))
    except Exception:
        print(f"record_graph_picture failed (python {platform.python_version()}):", file=sys.stderr)
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
