"""GL512's captured block, run again eagerly (`analysis/eager_region.py`): what it binds and
stores is compared, its stores into the program's objects are kept aside, and a block that
cannot run again without an effect on the program is refused with the reason."""

from __future__ import annotations

import textwrap
import types

import pytest

from graphlint.runtime_sanitizer.analysis.eager_region import STORE, NotComparable, region_program


def _program(body: str, header: str = "with torch.cuda.graph(g):", before: str = ""):
    source = textwrap.dedent(before) + header + "\n" + textwrap.indent(textwrap.dedent(body), "    ")
    line = source.splitlines().index(header) + 1
    return region_program(source, "prog.py", line)


def _run(program, **names) -> tuple[dict, dict]:
    stored: dict = {}

    def store(text, value, container, key):
        if isinstance(container, list):
            container[key] = value  # stands in for a tensor's in-place item write
        else:
            stored[text] = value

    scope = {**names, STORE: store}
    exec(program.code, scope)
    return scope, stored


def test_names_it_binds_are_outputs_and_stay_in_the_copy() -> None:
    program = _program("h = x * 2\ny, z = h + 1, h - 1\n")
    assert program.outputs == ("h", "y", "z")
    scope, _ = _run(program, x=3)
    assert (scope["y"], scope["z"]) == (7, 5)


def test_a_store_into_the_programs_object_is_kept_aside() -> None:
    program = _program("self.out = self.scale * x\nouts[2] = x\n")
    holder = types.SimpleNamespace(scale=3, out="untouched")
    outs = {2: "untouched"}
    _, stored = _run(program, self=holder, x=2, outs=outs)
    assert stored == {"self.out": 6, "outs[2]": 2}
    assert holder.out == "untouched" and outs[2] == "untouched"
    assert program.outputs == ("self.out", "outs[2]")


def test_a_slice_store_passes_its_key_as_a_slice() -> None:
    program = _program("buf[1:3] = [x, x]\n")
    buf = [0, 0, 0, 0]
    _run(program, buf=buf, x=5)
    assert buf == [0, 5, 5, 0]  # a tensor's item write goes through; the caller undoes it


def test_names_bound_in_a_loop_around_the_block_are_pinned() -> None:
    source = textwrap.dedent(
        """
        def capture(self, sizes):
            scale = 2.0
            for size in sizes:
                static = self.buffers[size]
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    self.outs[size] = static * scale
        """
    )
    line = next(i for i, text in enumerate(source.splitlines(), 1) if "with torch" in text)
    program = region_program(source, "prog.py", line)
    assert {"size", "static", "g"} <= set(program.pinned)
    assert "scale" not in program.pinned  # bound before the loop: read as the program holds it now


def test_a_header_over_several_lines_is_found_from_any_of_them() -> None:
    source = "with torch.cuda.graph(\n    g, pool=p\n):\n    y = x + 1\n"
    assert region_program(source, "prog.py", 2).outputs == ("y",)


@pytest.mark.parametrize(
    "body, reason",
    [
        ("loss = model(x)\nloss.backward()\n", "trains"),
        ("optimizer.step()\n", "trains"),
        ("self.count += 1\n", "updates `self.count` in place"),
        ("self.h = x\ny = self.h + 1\n", "reads `self.h` back"),
        ("a.b, c = x, x\n", "by unpacking"),
        ("global total\n", "a `global` statement"),
    ],
)
def test_what_cannot_run_again_is_refused_with_the_reason(body: str, reason: str) -> None:
    with pytest.raises(NotComparable, match=reason):
        _program(body)


def test_a_block_that_returns_from_its_function_is_refused() -> None:
    source = "def f(g, x):\n    with torch.cuda.graph(g):\n        return x + 1\n"
    with pytest.raises(NotComparable, match="a `return`"):
        region_program(source, "prog.py", 2)


def test_a_capture_that_is_not_a_with_block_is_refused() -> None:
    with pytest.raises(NotComparable, match="no `with` statement"):
        region_program("g.capture_begin()\ny = x + 1\ng.capture_end()\n", "prog.py", 1)


def test_nested_functions_keep_their_own_returns_and_stores() -> None:
    program = _program("def scaled(t):\n    t.seen = True\n    return t * 2\ny = scaled(x)\n")
    holder = types.SimpleNamespace()

    class Number(int):
        pass

    value = Number(4)
    scope, _ = _run(program, x=value, holder=holder)
    assert scope["y"] == 8 and value.seen is True  # the callee's own effects are not rewritten


def test_the_names_and_attribute_chains_it_reads_are_listed_whole() -> None:
    program = _program("h = self.model(self.static_x)\nself.out = h / temperature * self.cfg.scale\nbuf[0] = h\n")
    assert program.reads == ("self.model", "self.static_x", "temperature", "self.cfg.scale", "buf")
    # `h` is bound by the block, and `self.out` is stored into: neither is a read
