"""Probe (H200): how a CUtensorMap encodes its global address, and where bf16 conv kernels keep
the input pointer. Prints findings; It showed that CUtensorMap keeps the address raw in word 0 (already a slot) and that cuDNN keeps the
input's low 32 bits in a 4-byte field: the width-4 slots of `analysis.classify`."""

import ctypes
import sys

import torch

from graphlint.runtime_sanitizer.capture.two_captures import _OFFSET_BASE, capture_once, placed_copy

lib = ctypes.CDLL("libcuda.so.1")
encode = lib.cuTensorMapEncodeTiled
replace = lib.cuTensorMapReplaceAddress
u64p = ctypes.POINTER(ctypes.c_uint64)
u32p = ctypes.POINTER(ctypes.c_uint32)
encode.argtypes = [
    ctypes.c_void_p,
    ctypes.c_int,
    ctypes.c_uint32,
    ctypes.c_void_p,
    u64p,
    u64p,
    u32p,
    u32p,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
]
replace.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
torch.zeros(1, device="cuda")
raw = (ctypes.c_uint8 * 512)()
base = (ctypes.addressof(raw) + 63) // 64 * 64


def make(address):
    dims = (ctypes.c_uint64 * 2)(64, 64)
    strides = (ctypes.c_uint64 * 1)(256)
    box = (ctypes.c_uint32 * 2)(32, 32)
    es = (ctypes.c_uint32 * 2)(1, 1)
    rc = encode(base, 7, 2, address, dims, strides, box, es, 0, 0, 0, 0)
    return rc, ctypes.string_at(base, 128)


A0 = 0x7F1234560000
rc, d0 = make(A0)
print("encode rc", rc)
print("desc words", [hex(int.from_bytes(d0[i : i + 8], "little")) for i in range(0, 128, 8)])
mapping = {}
for k in range(4, 57):
    rc, d = make(A0 ^ (1 << k))
    diff = [i * 8 + b for i in range(128) for b in range(8) if (d[i] ^ d0[i]) >> b & 1]
    mapping[k] = diff
print("bit map", mapping)
# replace on an encoded copy
ctypes.memmove(base, d0, 128)
print("replace rc", replace(base, ctypes.c_void_p(A0 + 4096)), ctypes.string_at(base, 128) == make(A0 + 4096)[1])
ctypes.memmove(base + 8, d0, 128)
print("replace misaligned rc", replace(base + 8, ctypes.c_void_p(A0 + 4096)))
junk = bytes(range(128))
ctypes.memmove(base, junk, 128)
print("replace junk rc", replace(base, ctypes.c_void_p(A0)), ctypes.string_at(base, 128) != junk)

# bf16 conv: which params move with the input
import torchvision  # noqa: E402

model = torchvision.models.resnet18().cuda().to(torch.bfloat16).eval()
x = torch.randn(8, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
fn = torch.no_grad()(lambda t: model(t))
first = capture_once(fn, [x])
moved = placed_copy(x, _OFFSET_BASE + 4096)
second = capture_once(fn, [moved])
print("inputs", hex(x.data_ptr()), hex(moved.data_ptr()))
for a, b in zip(first.snapshot.nodes[:6], second.snapshot.nodes[:6], strict=False):
    print("node", a.index, a.type, a.name[:140])
    for pa, pb in zip(a.params, b.params, strict=False):
        if pa.data != pb.data:
            words = [
                (
                    o,
                    hex(int.from_bytes(pa.data[o : o + 8], "little")),
                    hex(int.from_bytes(pb.data[o : o + 8], "little")),
                )
                for o in range(0, pa.size - 7, 8)
                if pa.data[o : o + 8] != pb.data[o : o + 8]
            ]
            print("   param off", pa.offset, "size", pa.size, "differs at", words[:12])
sys.stdout.flush()
