"""Value kinds from use: which parameters and bindings a function's own code proves are tensors."""

from __future__ import annotations

import ast
import textwrap

import pytest

from graphlint.checkers.machinery.core.names import dotted_parts
from graphlint.checkers.machinery.core.tensor_uses import takes_tensor_first, tensor_uses

_IMPORTS = {"torch": "torch", "F": "torch.nn.functional", "dist": "torch.distributed"}


def _resolve(node: ast.AST) -> str | None:
    parts = dotted_parts(node)
    if parts is None or parts[0] not in _IMPORTS:
        return None
    return ".".join([_IMPORTS[parts[0]], *parts[1:]])


def _uses(source: str) -> tuple[set[str], set[str]]:
    """(parameters used as tensors, source of the value expressions whose binding is)."""
    function = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(function, ast.FunctionDef)
    params = [arg.arg for arg in function.args.args]
    found = tensor_uses(function, params, _resolve)
    values = {ast.unparse(node) for node in ast.walk(function) if id(node) in found.values}
    return found.params, values


@pytest.mark.parametrize(
    "use",
    [
        "a @ w",
        "w @ a",
        "a.copy_(w)",
        "a.record_stream(s)",
        "a.untyped_storage()",
        "a.data_ptr()",
        "a.is_cuda",
        "torch.relu(a)",
        "F.linear(a, w)",
        "torch.cat([w, a])",
        "torch.add(w, 1, out=a)",
    ],
)
def test_a_tensor_only_use_makes_the_parameter_a_tensor(use: str) -> None:
    params, _ = _uses(f"def f(a, w, s):\n    return {use}\n")
    assert "a" in params


@pytest.mark.parametrize(
    "use",
    [
        "a * 2",
        "a + w",
        "len(a)",
        "a.sum()",
        "a.view(-1)",
        "torch.zeros(a)",
        "torch.arange(a)",
        "torch.full(a, 1.0)",
        "torch.cat(a)",
        "torch.pow(a, w)",
        "torch.is_tensor(a)",
        "torch.cuda.stream(a)",
        "dist.all_reduce(a)",
        "[t @ w for t in a]",
        "(lambda: a @ w)",
    ],
)
def test_uses_that_ints_lists_and_arrays_share_prove_nothing(use: str) -> None:
    params, _ = _uses(f"def f(a, w):\n    return {use}\n")
    assert "a" not in params


def test_a_local_binding_used_as_a_tensor_marks_its_value() -> None:
    params, values = _uses(
        """
        def f(a, w):
            x = a * 2
            y = x @ w
            return y
        """
    )
    assert values == {"a * 2"}
    assert params == {"w"}


def test_a_use_after_rebinding_marks_the_new_binding_only() -> None:
    params, values = _uses(
        """
        def f(a, w, make):
            total = a + 1
            a = make(w)
            a.copy_(w)
            x = make(a)
            x = len(w)
            return total, x
        """
    )
    assert params == {"w"}  # what `copy_` copies from is a tensor
    assert values == {"make(w)"}


@pytest.mark.parametrize(
    "rebinding",
    [
        "for a in w:\n        pass",
        "with w as a:\n        pass",
        "a, b = w",
        "del a\n    a = w.pop()",
        "import a",
        "global a",
    ],
)
def test_every_kind_of_rebinding_ends_the_parameter(rebinding: str) -> None:
    params, _ = _uses(f"def f(a, w):\n    {rebinding}\n    return a @ w\n")
    assert "a" not in params


@pytest.mark.parametrize(
    ("statement", "used"),
    [
        ("with open(p) as a, ctx(a @ w):\n        pass", {"w"}),  # the first item binds before the second
        ("with ctx(a @ w) as a:\n        pass", {"a", "w"}),  # the manager reads the parameter
        ("try:\n        pass\n    except E as a:\n        pass", set()),
        ("try:\n        pass\n    except (a @ w).E:\n        pass", {"a", "w"}),
        ("match w:\n        case [a, *b]:\n            pass", set()),
        ("match w:\n        case 1 if a @ w:\n            pass", {"a", "w"}),
    ],
)
def test_compound_statements_bind_in_the_order_python_does(statement: str, used: set[str]) -> None:
    """A statement's names are bound where Python binds them, so a use before the binding
    reads the parameter and a use after it does not."""
    params, _ = _uses(f"def f(a, w):\n    {statement}\n    return a.data_ptr()\n")
    assert params == used


def test_a_use_in_a_loop_before_its_rebinding_reads_the_binding_before_the_loop() -> None:
    params, values = _uses(
        """
        def f(a, w, step):
            for _ in range(3):
                a.copy_(w)
                a = step(a)
        """
    )
    assert params == {"a", "w"}
    assert values == set()


def test_what_copy_copies_from_is_a_tensor() -> None:
    """`pinned.copy_(act, non_blocking=True)`: an offload's source is a device tensor, whatever
    made it (`act = layer(x)`), and `Tensor.copy_` takes nothing else."""
    params, values = _uses(
        """
        def f(layer, x, pinned):
            act = layer(x)
            pinned.copy_(act, non_blocking=True)
        """
    )
    assert params == {"pinned"}
    assert values == {"layer(x)"}


def test_a_walrus_binds_like_an_assignment() -> None:
    _, values = _uses(
        """
        def f(load, w):
            if (x := load()) is not None:
                return x @ w
        """
    )
    assert values == {"load()"}


def test_a_matmul_in_place_reads_both_sides() -> None:
    params, _ = _uses("def f(a, w):\n    a @= w\n")
    assert params == {"a", "w"}


def test_nested_functions_are_their_own_scope() -> None:
    params, _ = _uses(
        """
        def f(a, w):
            def inner(a):
                return a @ w
            return inner
        """
    )
    assert params == set()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("torch.relu", True),
        ("torch.nn.functional.softmax", True),
        ("torch.linalg.norm", True),
        ("torch.zeros", False),
        ("torch.empty_like", True),
        ("torch.tensor", False),
        ("torch.stack", False),
        ("torch.einsum", False),
        ("torch.set_default_device", False),
        ("torch.sym_int", False),
        ("torch._assert", False),
        ("torch.cuda.synchronize", False),
        ("torch.Generator", False),
        ("torch.fft.rfftfreq", False),
    ],
)
def test_which_torch_functions_take_a_tensor_first(name: str, expected: bool) -> None:
    assert takes_tensor_first(name) is expected
