"""The device dimension of tensor kinds: what a host-sync rule may take as living on the host."""

import ast

import pytest

from graphlint.checkers.machinery.core import kinds as T


def _expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


@pytest.mark.parametrize(
    ("operands", "expected"),
    [
        ((T.T_HOST, T.T_PY), T.T_HOST),  # torch.quantile(cpu_t, q=0.5)
        ((T.T_HOST, T.T_HOST_NAMED), T.T_HOST_NAMED),  # a name keeps the result a guess
        ((T.T_HOST, T.T_TENSOR), None),  # one operand may be on the device
        ((T.T_HOST, T.T_MASK), None),
        ((T.T_HOST, None), None),  # an unknown operand may be a device tensor
        ((T.T_HOST, T.Ty(T.INSTANCE, ref="m.C")), None),  # not a plain value
        ((T.T_PY, T.T_PY), None),  # no tensor among them: nothing says where the result lives
    ],
)
def test_host_result_needs_every_operand_on_the_host(operands: tuple, expected: T.Ty | None) -> None:
    assert T.host_result(operands) == expected


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("lens_cpu", True),
        ("cpu_lens[:n]", True),
        ("batch.seq_lens_cpu_upper_bound[:n]", True),
        ("batch.offsets_np", True),
        ("lens", False),
        ("batch_cpu.lens", False),  # the value is the attribute, not its owner
        ("cpus", False),  # a word of the name, not a substring
        ("f(lens_cpu)", False),
    ],
)
def test_named_as_host_reads_the_words_of_the_value_name(text: str, named: bool) -> None:
    assert T.named_as_host(_expr(text)) is named


def test_a_host_name_is_never_known_host_data() -> None:
    """Host-to-device rules report only known host data: a name may be wrong."""
    assert not T.may_be_on_device(T.T_HOST_NAMED)
    assert T.T_HOST_NAMED.kind != T.HOST
    assert T.may_be_on_device(T.T_TENSOR) and T.may_be_on_device(T.T_MASK)
    assert not T.may_be_on_device(None)


def test_a_comparison_of_host_tensors_is_a_host_mask() -> None:
    """Still a boolean mask (indexing with it has a data-dependent size), but read on the host."""
    mask = T.host_result((T.T_HOST_NAMED, T.T_PY), mask=True)
    assert mask == T.T_HOST_MASK and mask.kind in T.MASKS and not T.may_be_on_device(mask)
    assert T.unmasked(T.T_HOST_MASK) == T.T_HOST
    assert T.unmasked(T.T_MASK) == T.T_TENSOR


def test_every_dtype_of_the_installed_torch_is_a_cast_not_a_device() -> None:
    """`x.to(torch.<dtype>)` keeps `x` where it is, for every dtype torch has (not only the float
    ones): read as a device, a cast of host bookkeeping was a copy to the GPU (GL104) and its
    `.cpu()` a host sync (GL101)."""
    torch = pytest.importorskip("torch")
    dtypes = sorted(name for name in dir(torch) if isinstance(getattr(torch, name, None), torch.dtype))
    assert "int64" in dtypes and "bool" in dtypes
    assert [name for name in dtypes if not T.call_targets_device(_expr(f"x.to(torch.{name})"))] == dtypes
    for device in ("torch.device('cuda')", "device", "self.device", "'cuda:1'"):
        assert T.call_targets_device(_expr(f"x.to({device})")), device
