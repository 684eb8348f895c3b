"""`--poison` (GL511) on CPU tensors: the watch wired to the guard's dispatch mode as the guard
wires it, with a Python function standing in for the graph's kernels (a replay runs no eager
operator the mode sees). What a user relies on: a stale slot that reaches a value the program
reads is named; padding that the program slices off, read-modify-write refills, integer inputs,
weights and constants never change a result; a clean loop computes bit-identical values."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch", reason="the poison watch works on torch tensors")

from graphlint.runtime_sanitizer.analysis.graph_counts import GraphCounts  # noqa: E402
from graphlint.runtime_sanitizer.guard.dispatch_modes import HandleWatch  # noqa: E402
from graphlint.runtime_sanitizer.guard.graph_state import written_storages  # noqa: E402
from graphlint.runtime_sanitizer.guard.poison import PoisonWatch  # noqa: E402
from graphlint.runtime_sanitizer.guard.tensor_names import frame_names  # noqa: E402


class FakeGraph:
    """One captured graph: `kernel` is what its replay computes. With ``poison`` off it is the
    program as it runs without the sanitizer, the baseline every result is compared with."""

    def __init__(self, kernel: Callable[[], None], inputs, outputs, *, poison: bool, written=(), writes=(), names=None):
        self.kernel = kernel
        self.messages: list[str] = []
        self.watch = PoisonWatch(report=self.messages.append) if poison else None
        self.replays = 0
        self.mode = HandleWatch(self)
        if self.watch is not None:
            storages = {t.untyped_storage().data_ptr() for t in written}
            storages |= written_storages(inputs, list(writes))  # launches no dispatch mode sees
            self.watch.captured(1, inputs, outputs, storages, names or {})

    # HandleChecks, as ReplayGuard implements them for --poison
    def _check_read(self, tensor) -> None:
        pass

    def _note_new(self, tensor) -> None:
        pass

    def _before_op(self, func, tensors) -> None:
        if self.watch is not None:
            self.watch.before_op(func, tensors)

    def _after_op(self, func, tensors, results) -> None:
        if self.watch is not None:
            self.watch.after_op(func, tensors, results)

    def replay(self, graph_id: int = 1, kernel: Callable[[], None] | None = None) -> None:
        self.mode.__exit__(None, None, None)  # the graph's kernels are not eager operators
        try:
            self.replays += 1
            stale = self.watch.before_replay(graph_id) if self.watch else []
            (kernel or self.kernel)()
            if self.watch is not None:
                label = f"graph captured at model.py:{10 * graph_id}"
                self.watch.after_replay(graph_id, label, self.replays, ("model.py", 20), stale)
        finally:
            self.mode.__enter__()

    def __enter__(self) -> FakeGraph:
        if self.watch is not None:
            self.watch.install(torch)
        self.mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.mode.__exit__(*exc)
        if self.watch is not None:
            self.watch.uninstall(torch)


BATCHES = [8, 8, 8, 5, 8, 3]


def _padded_loop(poison: bool, read_all: bool):
    """A padded batch: static_x holds 8 rows, each step refills the live ones."""
    torch.manual_seed(0)
    data = [torch.randn(n, 4) for n in BATCHES]
    static_x = torch.zeros(8, 4)
    static_y = torch.zeros(8)

    def kernel():
        static_y.copy_(static_x.sum(dim=1))

    graph = FakeGraph(kernel, [static_x], [static_y], poison=poison, names=frame_names(sys._getframe()))
    totals = []
    with graph:
        for x in data:
            static_x[: len(x)].copy_(x)
            graph.replay()
            totals.append((static_y.sum() if read_all else static_y[: len(x)].sum()).clone())
    return torch.stack(totals), graph.messages


def test_a_partial_refill_whose_stale_rows_are_read_is_gl511_naming_buffers_and_replay():
    totals, messages = _padded_loop(poison=True, read_all=True)
    assert len(messages) == 1, messages
    message = messages[0]
    assert "`static_y` (float32, shape (8,))" in message and "replay 4 of the graph captured at model.py:10" in message
    assert "replayed at model.py:20" in message
    assert "12 of 32 elements of `static_x` (float32, shape (8, 4))" in message  # rows 5..7, 4 columns
    assert torch.isnan(totals[3]) and not torch.isnan(totals[:3]).any()  # changed on purpose, from the stale replay on


def test_padding_rows_sliced_off_are_no_finding_and_results_are_bit_identical():
    plain, _ = _padded_loop(poison=False, read_all=False)
    poisoned, messages = _padded_loop(poison=True, read_all=False)
    assert messages == []
    assert torch.equal(plain, poisoned)


def test_copies_of_a_poisoned_output_carry_the_mark_to_the_read():
    torch.manual_seed(0)
    static_x, static_y = torch.zeros(8, 4), torch.zeros(8)
    graph = FakeGraph(lambda: static_y.copy_(static_x.sum(dim=1)), [static_x], [static_y], poison=True)
    seen = []
    with graph:
        for n in BATCHES:
            static_x[:n].copy_(torch.randn(n, 4))
            graph.replay()
            kept = static_y.clone().double()  # a copy and a cast carry the mark, and are no finding
            seen.append(kept[:n].sum())  # the live rows: no NaN
    assert graph.messages == []
    with graph:
        kept.max()  # the whole copy, stale rows included
    assert len(graph.messages) == 1 and "a copy of a float32 tensor of shape (8,)" in graph.messages[0]


def _rmw_loop(poison: bool, dtype):
    """A position counter the program advances in place (`pos.add_(1)`): read, then written."""
    pos = torch.zeros(4, dtype=dtype)
    table = torch.arange(64.0).reshape(16, 4)
    out = torch.zeros(4, 4)

    def kernel():
        out.copy_(table[pos.long()])

    graph = FakeGraph(kernel, [pos, table], [out], poison=poison)
    results = []
    with graph:
        for _ in range(6):
            pos.add_(1)
            graph.replay()
            results.append(out.sum().clone())
    return torch.stack(results), graph


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_a_read_modify_write_refill_gets_its_values_back_bit_identical(dtype):
    plain, _ = _rmw_loop(False, dtype)
    poisoned, graph = _rmw_loop(True, dtype)
    assert torch.equal(plain, poisoned) and graph.messages == []
    assert graph.watch.poisoned_replays >= 4  # it was poisoned after every replay but the first


def _int_padded_loop(poison: bool):
    """Token ids padded to 8: the stale ids of padding rows index a table; sliced off after."""
    ids = torch.zeros(8, dtype=torch.int64)
    table = torch.randn(32, 4, generator=torch.Generator().manual_seed(1))
    out = torch.zeros(8, 4)
    graph = FakeGraph(lambda: out.copy_(table[ids]), [ids, table], [out], poison=poison)
    results = []
    with graph:
        for step, n in enumerate(BATCHES):
            ids[:n].copy_(torch.arange(n) + step)
            graph.replay()
            results.append(out.clone())  # padding rows included: stale ids, restored, as without poison
    return torch.stack(results), graph


def test_stale_integer_inputs_are_restored_before_the_replay_and_counted_once():
    plain, _ = _int_padded_loop(False)
    poisoned, graph = _int_padded_loop(True)
    assert torch.equal(plain, poisoned) and graph.messages == []
    assert graph.watch.stale_integers == ["3 of 8 elements of a int64 tensor of shape (8,)"]


def test_parameters_constants_set_up_once_and_graph_state_are_never_poisoned():
    weight = torch.nn.Parameter(torch.randn(4, 4))
    constant = torch.zeros(4)  # written once, after the capture: set-up, not a refill
    state = torch.zeros(4)  # the graph writes it itself (a running statistic)
    static_x, out = torch.zeros(4), torch.zeros(4)
    untouched = []

    def kernel():
        untouched.append(not any(torch.isnan(t).any() for t in (weight, constant, state)))
        with torch.no_grad():
            state.add_(static_x)
            out.copy_(weight @ static_x + constant + state)

    graph = FakeGraph(kernel, [weight, constant, state, static_x], [out], poison=True, written=[state])
    with graph:
        constant.fill_(1.0)
        for step in range(5):
            static_x.copy_(torch.full((4,), float(step)))
            graph.replay()
            out.sum()
    assert all(untouched) and graph.messages == []
    assert graph.watch.poisoned_replays == 4  # static_x only, from the second replay on


def _kv_decode(poison: bool, told: bool):
    """gpt-fast's compiled decode in small. Each generation's prefill writes the prompt's slots
    of a KV cache eagerly; each decode replay appends a slot through a Triton kernel, which no
    dispatch mode sees (the kernel's signature tells the write, `triton_launches`), and reads the
    slots so far. ``told``: the guard is given that launch's write, as it is since the write
    sets of Triton launches are merged with the operators'."""
    torch.manual_seed(0)
    cache, pos, token, out = torch.zeros(8), torch.zeros((), dtype=torch.int64), torch.zeros(1), torch.zeros(1)

    def kernel():  # `.data`: a replay moves no version counter
        cache.data[int(pos)] = token[0] * 0.5 + 1.0
        out.data.copy_(cache[: int(pos) + 1].sum().reshape(1))

    writes = [(cache.data_ptr(), cache.numel() * cache.element_size())] if told else []
    graph = FakeGraph(kernel, [cache, pos, token], [out], poison=poison, writes=writes)
    results = []
    with graph:
        for _ in range(3):
            cache[:2].copy_(torch.randn(2))  # the prefill
            pos.fill_(2)
            for _ in range(4):
                token.copy_(torch.randn(1))
                graph.replay()
                results.append(out.clone())
                pos.add_(1)
    return torch.stack(results), graph.messages


def test_a_cache_a_compiled_graph_appends_to_through_triton_is_its_own_state_and_never_poisoned():
    """Poisoning the cache would hand the next replay NaN where the graph's own earlier replays
    wrote (gpt-fast's compiled decode gave zeros under --poison until the Triton write sets
    were counted as the graph's writes)."""
    plain, _ = _kv_decode(False, told=True)
    assert torch.isfinite(plain).all()
    poisoned, messages = _kv_decode(True, told=True)
    assert torch.equal(plain, poisoned) and messages == []
    untold, _ = _kv_decode(True, told=False)
    assert not torch.equal(plain, untold)  # what the Triton write sets prevent


def test_written_storages_are_those_a_launch_lands_in():
    base = torch.zeros(16)
    view, other = base[4:8], torch.zeros(4)
    start = base.data_ptr()
    assert written_storages([view, other, None], [(start + 60, 4)]) == {start}
    assert written_storages([view], [(start + 64, 8)]) == set()  # just past the storage


def _forward_backward(poison: bool):
    """Two graphs reading one input, as make_graphed_callables' forward and backward read the
    sample: the program refills it, the forward replays, then the backward reads the same values."""
    torch.manual_seed(0)
    weight = torch.randn(4, 4)
    static_x, hidden, grad = torch.zeros(4), torch.zeros(4), torch.zeros(4)
    graph = FakeGraph(lambda: hidden.copy_(weight @ static_x), [static_x], [hidden], poison=poison)
    if graph.watch is not None:
        graph.watch.captured(2, [static_x, hidden], [grad], set(), {})

    def backward():
        grad.copy_(hidden * static_x)

    grads = []
    with graph:
        for _ in range(5):
            static_x.copy_(torch.randn(4))
            graph.replay(1)
            graph.replay(2, backward)
            grads.append(grad.clone())
    return torch.stack(grads), graph.messages


def test_an_input_two_graphs_read_is_poisoned_by_one_without_breaking_the_other():
    plain, _ = _forward_backward(False)
    poisoned, messages = _forward_backward(True)
    assert torch.equal(plain, poisoned) and messages == []


def test_a_clean_decode_loop_with_full_refills_is_bit_identical():
    def loop(poison: bool):
        torch.manual_seed(0)
        weight = torch.randn(16, 16)
        token, hidden = torch.zeros(16), torch.zeros(16)
        graph = FakeGraph(lambda: hidden.copy_(torch.tanh(weight @ token)), [token], [hidden], poison=poison)
        outs = []
        with graph:
            token.copy_(torch.randn(16))
            for _ in range(8):
                graph.replay()
                token.copy_(hidden * 0.5)  # the output feeds the next step, a full refill
                outs.append(hidden.clone())
        return torch.stack(outs), graph.messages

    plain, _ = loop(False)
    poisoned, messages = loop(True)
    assert torch.equal(plain, poisoned) and messages == []


def test_an_eager_read_of_a_poisoned_input_sees_the_values_it_would_have():
    static_x, out = torch.zeros(4), torch.zeros(4)
    graph = FakeGraph(lambda: out.copy_(static_x * 2), [static_x], [out], poison=True)
    with graph:
        for step in range(3):
            static_x.copy_(torch.full((4,), float(step + 1)))
            graph.replay()
        printed = str(static_x)  # poisoned now: restored for the read
        total = float(static_x.sum())
    assert "3., 3., 3., 3." in printed and total == 12.0 and graph.messages == []


def test_poison_counts_round_trip_and_say_results_change():
    counts = GraphCounts(seen=1, analysed=1, poisoned_replays=3, stale_integers=["3 of 8 elements of `ids`"])
    again = GraphCounts.from_dict(counts.to_dict())
    assert again == counts
    assert "--poison: 3 replays" in again.summary() and "stale, restored, not judged: 3 of 8" in again.summary()
    assert "poison" not in GraphCounts(seen=1).summary() and "poisoned_replays" not in GraphCounts().to_dict()


def test_the_cli_passes_poison_to_the_program_and_says_results_change():
    code = "import os; print(os.environ.get('GRAPHLINT_SANITIZE_POISON'))"
    done = subprocess.run(
        [sys.executable, "-m", "graphlint", "sanitize", "--poison", "--", "python", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # no torch import: the session never armed, so the variable is still there for the child to see
    assert done.stdout.strip() == "1"
    assert "--poison" in done.stderr and "on purpose" in done.stderr


def test_an_error_inside_poison_stops_it_gives_values_back_and_says_so(monkeypatch):
    from graphlint.runtime_sanitizer.guard.replay_guard import ReplayGuard

    guard = ReplayGuard(poison=True)

    def broken(func, tensors):
        raise RuntimeError("storage of an overwritten output")

    monkeypatch.setattr(guard.poison, "before_op", broken)
    with guard:
        result = torch.ones(3) + 1  # the program goes on, unchanged
        again = torch.ones(3) * 2
    assert torch.equal(result, again) and guard.poison is None
    [stopped] = [f for f in guard.findings if f.code == "GL500"]
    assert "--poison stopped during an eager operator: RuntimeError" in stopped.message
    assert stopped.path == __file__
    assert guard.graphs.refused[0][0] == "--poison"
