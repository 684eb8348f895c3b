"""Just enough type knowledge to tell a tensor from a Python value.

`int(x.shape[0])`, `if training:` and `if size > bs:` are fine inside a capture;
`if x.max() > 10:` and `float(y.abs().max())` are host syncs. The difference is whether an
expression is tensor-valued, so every value gets a small kind: the result of torch
functions, tensor methods and operators on tensors, parameters annotated `Tensor`, and
module calls are tensors; literals, shapes, dtypes and devices are Python values; anything
else is unknown, and rules never guess on unknowns.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

TENSOR = "tensor"  # on the device (or device unknown)
HOST = "host_tensor"  # known to live in host memory
HOST_NAMED = (
    "host_named"  # named as host data (`lens_cpu`, `idx_np`): never reported as on the device, never known host
)
MASK = "mask"  # a boolean tensor: comparisons, isnan, logical ops
HOST_MASK = "host_mask"  # a boolean tensor on the host: a comparison of host tensors
PY = "py"  # a plain Python value: numbers, strings, shapes, dtypes, containers
STREAM = "stream"
EVENT = "event"
GRAPH = "graph"
GENERATOR = "cuda_generator"
OPTIMIZER = "optimizer"
SCALER = "grad_scaler"
MODULE = "module"  # a torch.nn module instance: calling it gives a tensor
GRAPHED = "graphed"  # a make_graphed_callables / torch.compile result
INSTANCE = "instance"  # an instance of a class defined in the analysed project
FUNCTION = "function"
DEVICE_MODULE = "device_module"  # torch.cuda's stream/event API under another name: get_accelerator()

TENSORISH = frozenset({TENSOR, HOST, MASK, HOST_NAMED, HOST_MASK})
# The device dimension of a tensor kind: TENSOR and MASK may be on the device; HOST is known
# to be in host memory; HOST_NAMED is what the code calls host data. A host-sync rule reports
# only what may be on the device, a host-to-device rule only what is known to be host data.
ON_DEVICE = frozenset({TENSOR, MASK})
ON_HOST = frozenset({HOST, HOST_NAMED, HOST_MASK})
MASKS = frozenset({MASK, HOST_MASK})


@dataclass(frozen=True)
class Ty:
    kind: str
    ref: str | None = None  # class qualname: of the instance (INSTANCE), of the bound method's owner (FUNCTION)
    capturable: bool = False  # OPTIMIZER: built with capturable=True
    fixable_at: tuple[int, int, int, int] | None = None  # OPTIMIZER: constructor call span
    element: str | None = None  # container of INSTANCE: class of its elements
    method: str | None = None  # FUNCTION: the bound method's name (called, it runs ref's method)
    tree: bool = False  # GRAPHED: a cudagraph-mode torch.compile result (one CUDA graph tree for all)

    @property
    def tensorish(self) -> bool:
        return self.kind in TENSORISH


T_TENSOR = Ty(TENSOR)
T_HOST = Ty(HOST)
T_HOST_NAMED = Ty(HOST_NAMED)
T_HOST_MASK = Ty(HOST_MASK)
T_MASK = Ty(MASK)
T_PY = Ty(PY)

# Tensor attributes that are themselves tensors, and those that are Python values.
TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "grad", "data", "real", "imag"})
PY_ATTRS = frozenset(
    {
        "shape",
        "dtype",
        "device",
        "ndim",
        "is_cuda",
        "is_cpu",
        "requires_grad",
        "layout",
        "is_leaf",
        "is_sparse",
        "names",
        "itemsize",
        "nbytes",
    }
)

# Tensor methods returning Python values (the host-sync ones are rules of their own).
PY_METHODS = frozenset(
    {
        "item",
        "tolist",
        "size",
        "dim",
        "numel",
        "nelement",
        "ndimension",
        "data_ptr",
        "stride",
        "storage_offset",
        "element_size",
        "is_contiguous",
        "is_floating_point",
        "is_complex",
        "get_device",
        "numpy",
        "untyped_storage",
        "register_hook",
        "record_stream",
        "__len__",
    }
)
MASK_METHODS = frozenset(
    {
        "bool",
        "eq",
        "ne",
        "gt",
        "ge",
        "lt",
        "le",
        "isnan",
        "isinf",
        "isfinite",
        "isneginf",
        "isposinf",
        "logical_not",
        "logical_and",
        "logical_or",
        "logical_xor",
        "any",
        "all",
    }
)
MASK_FUNCTIONS = frozenset(f"torch.{name}" for name in MASK_METHODS - {"bool"}) | {
    "torch.isin",
    "torch.isclose",
}

# Method names that only tensors (and torch modules) have among common Python types: a call
# of one on an unknown receiver is taken to give a tensor.
TENSOR_ONLY_METHODS = frozenset(
    {
        "sum",
        "mean",
        "max",
        "min",
        "amax",
        "amin",
        "argmax",
        "argmin",
        "abs",
        "norm",
        "std",
        "var",
        "prod",
        "cumsum",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "pow",
        "clamp",
        "clamp_",
        "softmax",
        "log_softmax",
        "sigmoid",
        "tanh",
        "relu",
        "matmul",
        "mm",
        "bmm",
        "float",
        "half",
        "bfloat16",
        "double",
        "long",
        "int",
        "contiguous",
        "view",
        "reshape",
        "transpose",
        "permute",
        "unsqueeze",
        "squeeze",
        "flatten",
        "detach",
        "clone",
        "expand",
        "expand_as",
        "masked_fill",
        "masked_fill_",
        "add",
        "sub",
        "mul",
        "div",
        "add_",
        "mul_",
        "zero_",
        "fill_",
        "copy_",
        "type_as",
        "new_zeros",
        "new_ones",
        "new_empty",
        "new_full",
        "new_tensor",
        "gather",
        "scatter",
        "index_select",
        "topk",
        "sort",
        "chunk",
        "narrow",
        "roll",
        "flip",
        "where",
        "square",
        "neg",
        "reciprocal",
        "sign",
        "floor",
        "ceil",
        "round",
        "trunc",
        "frac",
        "isnan",
        "isinf",
        "isfinite",
        "any",
        "all",
        "nonzero",
        "bool",
        "cuda",
        "nan_to_num",
        "logsumexp",
        "count_nonzero",
        "diff",
        "t",
    }
)

# torch.* functions that return Python values or non-tensors.
_TORCH_PY_FUNCTIONS = frozenset(
    {
        "torch.is_tensor",
        "torch.is_storage",
        "torch.is_floating_point",
        "torch.is_complex",
        "torch.is_grad_enabled",
        "torch.is_inference_mode_enabled",
        "torch.is_nonzero",
        "torch.get_default_dtype",
        "torch.numel",
        "torch.device",
        "torch.dtype",
        "torch.Size",
        "torch.finfo",
        "torch.iinfo",
        "torch.manual_seed",
        "torch.set_grad_enabled",
        "torch.no_grad",
        "torch.enable_grad",
        "torch.inference_mode",
        "torch.equal",
        "torch.allclose",
        "torch.compile",
        "torch.autocast",
        "torch.set_default_dtype",
        "torch.use_deterministic_algorithms",
        "torch.get_num_threads",
        "torch.set_num_threads",
        "torch.load",
        "torch.save",
        "torch.typename",
        "torch.result_type",
        "torch.promote_types",
        "torch.can_cast",
    }
)
# torch's state queries and setters (`is_autocast_enabled`, `are_deterministic_algorithms_enabled`,
# `get_default_device`, `set_printoptions`) return Python values; the tensor predicates are
# spelled without the underscore (`isnan`, `isin`, `isclose`).
_QUERY_PREFIXES = ("is_", "are_", "get_", "set_")
_TORCH_NON_TENSOR_PREFIXES = (
    "torch.cuda.",
    "torch.backends.",
    "torch.distributed.",
    "torch.utils.",
    "torch._dynamo.",
    "torch.compiler.",
    "torch.jit.",
    "torch.autograd.",
    "torch.optim.",
    "torch.nn.",
    "torch.amp.",
    "torch.profiler.",
    "torch.fx.",
    "torch.library.",
    "torch.testing.",
    "torch.accelerator.",
    "torch.cpu.",
    "torch.multiprocessing.",
    "torch.hub.",
    "torch.onnx.",
    "torch.export.",
    "torch.overrides.",
    "torch.random.",
    "torch.serialization.",
    "torch.package.",
    "torch.ops.",
    "torch._C.",
    "torch._ops.",
    "torch.futures.",
    "torch.mps.",
    "torch.xpu.",
    "torch.types.",
)
_TENSOR_RETURNING_PREFIXES = ("torch.nn.functional.", "torch.special.", "torch.linalg.", "torch.fft.")
# A generator's state is a CPU ByteTensor, the CUDA generator's too (Megatron's RNG tracker
# compares `torch.get_rng_state()` before and after a region and reads the result).
_RNG_STATES = frozenset({"torch.get_rng_state", "torch.random.get_rng_state", "torch.cuda.get_rng_state"})
_HOST_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.asarray", "torch.from_numpy", *_RNG_STATES})
# Factories that make a tensor from nothing: on the CPU when no `device=` is given.
CPU_DEFAULT_FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "empty",
        "zeros",
        "ones",
        "full",
        "arange",
        "range",
        "linspace",
        "logspace",
        "rand",
        "randn",
        "randint",
        "randperm",
        "eye",
        "empty_strided",
    )
)
OPTIMIZERS_WITH_CAPTURABLE = frozenset(
    f"torch.optim.{name}"
    for name in ("Adam", "AdamW", "Adamax", "NAdam", "RAdam", "ASGD", "Adadelta", "Rprop", "RMSprop")
)
OPTIMIZERS_NEVER_CAPTURABLE = frozenset(f"torch.optim.{name}" for name in ("Adagrad", "LBFGS", "SparseAdam"))


def may_be_on_device(ty: Ty | None) -> bool:
    """A tensor that may live on the device: known-host and host-named ones do not."""
    return ty is not None and ty.kind in ON_DEVICE


def host_result(operands: Iterable[Ty | None], mask: bool = False) -> Ty | None:
    """The kind of a tensor computed from ``operands`` alone, when it stays on the host.

    HOST when every tensor among them is known host data, HOST_NAMED when one is only named
    so, HOST_MASK for a ``mask`` (a comparison); None when an operand may be on the device,
    is unknown or is not a plain value, or no operand is a tensor (then nothing says where
    the result lives).
    """
    tensors = named = False
    for ty in operands:
        if ty is None or (ty.kind not in ON_HOST and ty.kind != PY):
            return None
        tensors = tensors or ty.kind in ON_HOST
        named = named or ty.kind == HOST_NAMED
    if not tensors:
        return None
    if mask:
        return T_HOST_MASK
    return T_HOST_NAMED if named else T_HOST


def unmasked(ty: Ty) -> Ty:
    """What indexing or arithmetic on a boolean tensor gives: a tensor where the mask lives."""
    if ty.kind == MASK:
        return T_TENSOR
    return T_HOST if ty.kind == HOST_MASK else ty


# Words of a name that say the value is host data: `seq_lens_cpu`, `cpu_buf`, `idx_np`.
_HOST_NAME_WORDS = frozenset({"cpu", "host", "np", "numpy", "pinned"})


def named_as_host(node: ast.expr) -> bool:
    """Does the code name this value as host data (`lens_cpu[:n]`, `batch.pos_np`)?

    Only a reason not to report a host sync: a name is a convention, not a fact, so it never
    makes a value known host data (that would report host-to-device copies on a guess).
    """
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    else:
        return False
    return not _HOST_NAME_WORDS.isdisjoint(name.lower().split("_"))


def is_torch_tensor_function(name: str) -> bool:
    """Does the torch function ``name`` return a tensor?"""
    if name.startswith(_TENSOR_RETURNING_PREFIXES):
        return True
    if not name.startswith("torch.") or name in _TORCH_PY_FUNCTIONS:
        return False
    if name.startswith(_TORCH_NON_TENSOR_PREFIXES):
        return False
    tail = name[len("torch.") :]
    if tail.startswith(_QUERY_PREFIXES):
        return False  # torch.is_autocast_enabled(), torch.are_deterministic_algorithms_enabled()
    # torch.float32, torch.Tensor (the class), torch.Generator are not tensor-valued calls.
    return "." not in tail and not tail[:1].isupper()


def device_is_host(node: ast.expr | None) -> bool | None:
    """Is a device argument the CPU? ``None`` argument means the default (host)."""
    if node is None:
        return True
    if isinstance(node, ast.Constant):
        if node.value is None:
            return True
        if isinstance(node.value, str):
            return node.value.split(":")[0] == "cpu"
        if isinstance(node.value, int):
            return False  # a device ordinal
        return None
    if isinstance(node, ast.Call) and node.args:
        first = node.args[0]
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name == "device":
            return device_is_host(first)
    return False  # a variable named device, x.device, torch.device(rank): the accelerator


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def is_false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def host_factory_kind(name: str, call: ast.Call) -> Ty:
    """torch.tensor & co.: on the host unless a device says otherwise."""
    if name == "torch.from_numpy" or name in _RNG_STATES:
        return T_HOST
    device = keyword(call, "device")
    return T_HOST if device_is_host(device) else T_TENSOR


def is_host_factory(name: str | None) -> bool:
    return name in _HOST_FACTORIES


def _device_argument(call: ast.Call) -> ast.expr | None:
    return keyword(call, "device") or (call.args[0] if call.args else None)


def call_targets_host(call: ast.Call) -> bool:
    """`.to("cpu")`, `.to(device="cpu")`, `.to(torch.device("cpu"))` (not `.to(None)`)."""
    device = _device_argument(call)
    return (
        device is not None
        and device_is_host(device) is True
        and not (isinstance(device, ast.Constant) and device.value is None)
    )


# torch's dtype names: the sized ones by pattern (int64, uint8, float8_e4m3fn, complex64, qint8,
# quint4x2, bits16...), the aliases by name. A cast (`lens.to(torch.int64)`) keeps the tensor where
# it is; read as a device, it made host bookkeeping a host-to-device copy and its `.cpu()` a sync.
_SIZED_DTYPE = re.compile(r"(?:q?u?int|b?float|complex|bits)\d+(?:x\d+)?(?:_[a-z0-9]+)*")
_DTYPE_ALIASES = frozenset(
    {"half", "float", "double", "long", "int", "short", "bool", "bit", "cfloat", "cdouble", "chalf"}
)


def is_dtype_name(name: str) -> bool:
    """Is ``name`` (the attribute in `torch.name`) one of torch's dtypes?"""
    return name in _DTYPE_ALIASES or _SIZED_DTYPE.fullmatch(name) is not None


def call_targets_device(call: ast.Call) -> bool:
    """`.to("cuda")`, `.to(device)`; `.to(torch.float16)` and `.to(torch.int64)` are dtypes."""
    device = _device_argument(call)
    if device is None:
        return False
    if isinstance(device, ast.Attribute) and is_dtype_name(device.attr):
        return False
    return device_is_host(device) is False
